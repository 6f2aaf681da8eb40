// What a reader at 1280x800 would see as broken on one rendered docs page (tests/test_docs_render.py):
// an element reaching past the content area without a scrolling box of its own that fits, text cut off by a
// clipping box, and markup left raw in the prose (code is left out: it may show any of these on purpose).
() => {
  const area = document.querySelector(".md-content");
  const col = document.querySelector("article.md-content__inner");
  if (!area || !col) return {wide: [], clipped: [], raw: ["no content column"]};
  const right = area.getBoundingClientRect().right + 1;
  const name = el => `${el.tagName.toLowerCase()}${el.className ? "." + String(el.className).split(" ")[0] : ""}`
    + ` "${(el.textContent || "").trim().slice(0, 40)}"`;
  const wide = [], clipped = [];
  for (const el of col.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > right) {
      let box = el.parentElement, held = false;
      while (box && box !== col) {  // scrolls inside a box of its own: fine when that box (or one around it) fits
        const ox = getComputedStyle(box).overflowX;
        if ((ox === "auto" || ox === "scroll") && box.getBoundingClientRect().right <= right) { held = true; break; }
        if (ox === "hidden" || ox === "clip") break;
        box = box.parentElement;
      }
      if (!held) wide.push(`${name(el)} +${Math.round(r.right - right)} px`);
    }
    const ox = getComputedStyle(el).overflowX;
    if ((ox === "hidden" || ox === "clip") && el.scrollWidth > el.clientWidth + 1)
      clipped.push(`${name(el)} hides ${el.scrollWidth - el.clientWidth} px`);
  }
  const prose = col.cloneNode(true);
  prose.querySelectorAll("pre, code, script, style, .katex").forEach(n => n.remove());
  const text = prose.textContent, raw = [];
  for (const re of [/``[^`]+``/g, /\[[^\]\n]+\]\([^)\s]+\)/g, /\{\{[^}]*\}\}|\{%[^%]*%\}/g,
                    /:(?:class|func|meth|attr|mod|data|exc|obj):`/g, /^ *#{1,6} \S/mg]) {
    raw.push(...(text.match(re) || []).slice(0, 3));
  }
  for (const p of prose.querySelectorAll("p"))  // a table row left as text
    raw.push(...(p.textContent.match(/^ *\|.*\| *$/mg) || []).slice(0, 1));
  return {wide: wide.slice(0, 10), clipped: clipped.slice(0, 10), raw};
}
