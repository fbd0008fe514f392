// The artifact preview's own behaviour: PDF pages through the vendored
// pdf.js (imported only when a PDF preview opens), the full-screen toggle,
// and the mobile drawer's close button and count. htmx swaps previews in, so
// everything here is delegated from document or runs after each swap.
const pdfjsURL = "/static/vendor/pdfjs/pdf.min.mjs";
const workerURL = "/static/vendor/pdfjs/pdf.worker.min.mjs";
let pdfjs = null;

async function loadPDFJS() {
  if (!pdfjs) {
    pdfjs = await import(pdfjsURL);
    pdfjs.GlobalWorkerOptions.workerSrc = workerURL;
  }
  return pdfjs;
}

async function openPDF(view) {
  view.dataset.ready = "1";
  const status = view.querySelector(".pdf-status");
  const canvas = view.querySelector(".pdf-canvas");
  const prev = view.querySelector("[data-pdf-prev]");
  const next = view.querySelector("[data-pdf-next]");
  const pageOut = view.querySelector("[data-pdf-page]");
  const pagesOut = view.querySelector("[data-pdf-pages]");
  let doc;
  try {
    const lib = await loadPDFJS();
    // eval stays off: the page's CSP has no 'unsafe-eval', and pdf.js
    // then builds glyphs without generated code.
    doc = await lib.getDocument({ url: view.dataset.pdfSrc, isEvalSupported: false }).promise;
  } catch (err) {
    status.textContent = "This PDF could not be shown (" + (err && err.message ? err.message : err) + "); download it to open it.";
    view.dataset.state = "error";
    return;
  }
  let page = 1, rendering = null;
  pagesOut.textContent = String(doc.numPages);
  async function show(n) {
    page = Math.min(Math.max(1, n), doc.numPages);
    pageOut.textContent = String(page);
    prev.disabled = page <= 1;
    next.disabled = page >= doc.numPages;
    if (rendering) { rendering.cancel(); }
    const p = await doc.getPage(page);
    const stage = view.querySelector(".pdf-stage");
    const base = p.getViewport({ scale: 1 });
    const width = Math.max(200, stage.clientWidth || 600);
    const vp = p.getViewport({ scale: width / base.width });
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.floor(vp.width * ratio);
    canvas.height = Math.floor(vp.height * ratio);
    canvas.style.width = Math.floor(vp.width) + "px";
    canvas.style.height = Math.floor(vp.height) + "px";
    rendering = p.render({ canvas, canvasContext: canvas.getContext("2d"), viewport: vp, transform: ratio !== 1 ? [ratio, 0, 0, ratio, 0, 0] : null });
    try {
      await rendering.promise;
      status.textContent = "";
      view.dataset.state = "rendered";
      view.dataset.page = String(page);
    } catch (err) {
      if (!err || err.name !== "RenderingCancelledException") {
        status.textContent = "This page could not be drawn; download the PDF to open it.";
        view.dataset.state = "error";
      }
    }
  }
  prev.addEventListener("click", () => show(page - 1));
  next.addEventListener("click", () => show(page + 1));
  view.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft" || e.key === "PageUp") { show(page - 1); }
    if (e.key === "ArrowRight" || e.key === "PageDown") { show(page + 1); }
  });
  await show(1);
}

function shelfCount() {
  const sum = document.getElementById("shelf-summary");
  const toggle = document.getElementById("shelf-toggle");
  if (!sum || !toggle) { return; }
  let badge = toggle.querySelector(".count");
  if (!badge) {
    badge = document.createElement("span");
    badge.className = "count";
    toggle.appendChild(badge);
  }
  badge.textContent = sum.dataset.count || "0";
  badge.setAttribute("aria-label", (sum.dataset.count || "0") + " artifacts");
}

function settle() {
  document.querySelectorAll(".pdf-view[data-pdf-src]:not([data-ready])").forEach(openPDF);
  shelfCount();
}

function setFullscreen(on) {
  const p = document.getElementById("preview");
  if (!p) { return; }
  p.classList.toggle("fullscreen", on);
  document.body.classList.toggle("preview-full", on);
  const b = p.querySelector("[data-fullscreen-preview]");
  if (b) {
    b.setAttribute("aria-pressed", String(on));
    b.setAttribute("aria-label", on ? "Leave full screen" : "Show the preview full screen");
  }
}

document.addEventListener("click", (e) => {
  const t = e.target instanceof Element ? e.target : null;
  if (!t) { return; }
  if (t.closest("[data-fullscreen-preview]")) {
    const p = document.getElementById("preview");
    setFullscreen(!(p && p.classList.contains("fullscreen")));
  } else if (t.closest("[data-close-shelf]")) {
    document.body.classList.remove("shelf-open");
    const toggle = document.getElementById("shelf-toggle");
    if (toggle) { toggle.setAttribute("aria-expanded", "false"); toggle.focus(); }
  } else if (t.closest("[data-close-preview]")) {
    setFullscreen(false);
  }
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && document.body.classList.contains("preview-full")) { setFullscreen(false); }
});
document.addEventListener("htmx:afterSettle", settle);
if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", settle); } else { settle(); }
