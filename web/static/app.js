// desk web UI behaviour: the composer (Enter sends, drafts saved on the
// server), transcript scrolling, copy buttons, uploads with progress, the
// command palette (Ctrl/Cmd+K or +P; Ctrl/Cmd+Shift+P in command mode) and the narrow-screen panels. Everything
// else is htmx. No inline scripts: the CSP forbids them.
(function () {
  "use strict";

  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

  // The SSE extension reports every dropped connection as htmx:sseError,
  // which htmx also writes to the console as an error. A stream the
  // browser is already retrying (desk restarting, a network blip) is a
  // state the page shows with its connection indicator, not an error: its
  // error goes to the page as htmx:sseError without the console line. A
  // stream the browser gave up on (CLOSED) still takes the extension's
  // path, which reconnects it and logs.
  if (window.htmx && htmx.createEventSource) {
    var createEventSource = htmx.createEventSource;
    htmx.createEventSource = function (url) {
      var es = createEventSource(url);
      var handler = null;
      Object.defineProperty(es, "onerror", { configurable: true, get: function () { return handler; }, set: function (fn) { handler = fn; } });
      es.addEventListener("error", function (e) {
        if (es.readyState === EventSource.CLOSED) { if (handler) handler.call(es, e); return; }
        $all("[sse-connect]").forEach(function (el) {
          if (el.getAttribute("sse-connect") === url) htmx.trigger(el, "htmx:sseError", { source: es });
        });
      });
      return es;
    };
  }

  // ---- Transcript: open at the newest message, follow new ones while the
  // reader is at the bottom, never show a message twice.
  var transcript = $("#transcript");
  var atBottom = true;
  function scrollToBottom() { if (transcript) transcript.scrollTop = transcript.scrollHeight; }
  if (transcript) {
    scrollToBottom();
    transcript.addEventListener("scroll", function () {
      atBottom = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
    });
    new MutationObserver(function () {
      dedupe();
      if (atBottom) scrollToBottom();
    }).observe(transcript, { childList: true, subtree: true, characterData: true });
  }
  function dedupe() {
    var seen = {};
    $all("#transcript > .msg[id], #transcript .step[id]").forEach(function (m) {
      if (seen[m.id]) m.remove(); else seen[m.id] = true;
    });
  }

  // ---- Copy buttons on code blocks of rendered Markdown.
  function addCopyButtons(root) {
    $all(".md pre", root).forEach(function (pre) {
      if (pre.querySelector(".copy-btn")) return;
      var b = document.createElement("button");
      b.type = "button";
      b.className = "copy-btn";
      b.textContent = "Copy";
      b.setAttribute("aria-label", "Copy code");
      b.addEventListener("click", function () {
        var code = pre.querySelector("code") || pre;
        var text = code.innerText;
        var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 1500); };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
        } else { fallbackCopy(text); done(); }
      });
      pre.appendChild(b);
    });
  }
  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.className = "sr";
    document.body.appendChild(ta);
    ta.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    ta.remove();
  }
  addCopyButtons(document);

  // ---- Composer: Enter sends, Shift+Enter adds a line; the draft is saved
  // on the server as it is typed and restored by the page.
  var composer = $("#composer");
  var draftTimer = null;
  var draftState = $("#draft-state");
  // The save in flight: a send waits for it, so a draft saved just before
  // never lands after the send cleared it.
  var saving = null;
  function saveDraft(keepalive) {
    var ta = $("#composer-text");
    if (!composer || !ta) return Promise.resolve();
    clearTimeout(draftTimer);
    draftTimer = null;
    var body = new URLSearchParams();
    body.set("text", ta.value);
    var p = fetch(composer.dataset.draftUrl, {
      method: "PUT", body: body, keepalive: !!keepalive, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Content-Type": "application/x-www-form-urlencoded" }
    }).then(function (r) {
      if (draftState && p === saving) draftState.textContent = r.ok ? "Draft saved" : "Draft not saved";
    }, function () { if (draftState) draftState.textContent = "Draft not saved"; });
    saving = p;
    p.then(function () { if (saving === p) saving = null; });
    return p;
  }
  if (composer) {
    var ta = $("#composer-text");
    ta.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey && !e.metaKey) {
        e.preventDefault();
        if (ta.value.trim() !== "") composer.requestSubmit();
      }
    });
    ta.addEventListener("input", function () {
      if (draftState) draftState.textContent = "";
      clearTimeout(draftTimer);
      draftTimer = setTimeout(saveDraft, 400);
    });
    composer.addEventListener("htmx:confirm", function (e) {
      if (e.detail.elt !== composer) return;
      clearTimeout(draftTimer);
      draftTimer = null;
      if (saving) {
        e.preventDefault();
        var go = function () { e.detail.issueRequest(true); };
        saving.then(go, go);
      }
    });
    composer.addEventListener("htmx:afterRequest", function (e) {
      if (e.detail.elt === composer && e.detail.successful) {
        ta.value = "";
        saving = null;
        if (draftState) draftState.textContent = "";
        atBottom = true;
        scrollToBottom();
      }
    });
    window.addEventListener("pagehide", function () { if (draftTimer) saveDraft(true); });
  }

  // ---- Uploads: drag and drop (or choose) onto a drop zone; each file is
  // sent as its own request with a progress bar.
  function upload(zone, file) {
    var list = $("#uploads");
    var li = document.createElement("li");
    var name = document.createElement("span");
    name.textContent = file.name;
    var pct = document.createElement("span");
    pct.textContent = "0%";
    var bar = document.createElement("progress");
    bar.max = 100; bar.value = 0;
    bar.setAttribute("aria-label", "Uploading " + file.name);
    li.append(name, pct, bar);
    if (list) list.appendChild(li);
    var url = zone.dataset.uploadUrl;
    if (url.indexOf("/files/upload") >= 0) {
      var u = new URL(url, location.href);
      var dir = u.searchParams.get("path") || "/";
      u.searchParams.set("path", dir.replace(/\/$/, "") + "/" + file.name);
      url = u.pathname + u.search;
    } else {
      url += (url.indexOf("?") >= 0 ? "&" : "?") + "name=" + encodeURIComponent(file.name);
    }
    var xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    xhr.setRequestHeader("X-CSRF-Token", csrf);
    xhr.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    xhr.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) { bar.value = Math.round(e.loaded * 100 / e.total); pct.textContent = bar.value + "%"; }
    });
    xhr.addEventListener("load", function () {
      if (xhr.status >= 200 && xhr.status < 300) {
        bar.value = 100; pct.textContent = "done";
        setTimeout(function () { li.remove(); }, 1500);
        var target = zone.dataset.refreshTarget;
        if (target) htmx.ajax("GET", zone.dataset.refreshUrl, { target: target, swap: "outerHTML" });
        else htmx.ajax("GET", zone.dataset.refreshUrl, { target: "#shelf", swap: "none" });
      } else {
        li.classList.add("failed");
        pct.textContent = "failed";
        var msg = document.createElement("span");
        var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
        msg.textContent = (doc.body && doc.body.textContent.trim()) || ("HTTP " + xhr.status);
        li.appendChild(msg);
      }
    });
    xhr.addEventListener("error", function () { li.classList.add("failed"); pct.textContent = "failed"; });
    xhr.send(file);
  }
  document.addEventListener("dragover", function (e) {
    var zone = e.target.closest && e.target.closest(".dropzone");
    if (zone) { e.preventDefault(); zone.classList.add("over"); }
  });
  document.addEventListener("dragleave", function (e) {
    var zone = e.target.closest && e.target.closest(".dropzone");
    if (zone) zone.classList.remove("over");
  });
  document.addEventListener("drop", function (e) {
    var zone = e.target.closest && e.target.closest(".dropzone");
    if (!zone) return;
    e.preventDefault();
    zone.classList.remove("over");
    Array.prototype.forEach.call(e.dataTransfer.files, function (f) { upload(zone, f); });
  });
  document.addEventListener("change", function (e) {
    if (!e.target.classList.contains("file-input")) return;
    var zone = e.target.closest(".dropzone");
    Array.prototype.forEach.call(e.target.files, function (f) { upload(zone, f); });
    e.target.value = "";
  });

  // ---- Panels on narrow screens, the preview, toasts.
  function toggle(cls, btn) {
    var open = document.body.classList.toggle(cls);
    if (btn) btn.setAttribute("aria-expanded", open ? "true" : "false");
  }
  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target : e.target.parentElement;
    if (!t) return;
    if (t.closest("#side-toggle")) toggle("side-open", $("#side-toggle"));
    else if (t.closest("#shelf-toggle")) toggle("shelf-open", $("#shelf-toggle"));
    else if (t.closest("[data-open-shelf]")) { document.body.classList.add("shelf-open"); }
    else if (t.closest("[data-close-preview]")) { var p = $("#preview"); if (p) p.innerHTML = ""; }
    else if (t.closest("[data-dismiss]")) { var toast = $("#toast"); if (toast) toast.innerHTML = ""; }
    // A row menu closes when something else is clicked.
    $all("details.row-menu[open], details.ws-switch[open]").forEach(function (d) {
      if (!d.contains(t)) d.removeAttribute("open");
    });
  });
  var toastTimer = null;
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.detail.target && e.detail.target.id === "toast") {
      clearTimeout(toastTimer);
      toastTimer = setTimeout(function () { var t = $("#toast"); if (t) t.innerHTML = ""; }, 8000);
    }
  });
  // ---- The connection indicator: shown while the page's event stream is
  // down (desk restarting, the network gone), cleared with every trace of
  // the outage once the stream is back.
  var conn = $("#conn");
  function connection(ok) {
    if (conn) conn.dataset.state = ok ? "ok" : "lost";
    if (ok) $all("#toast .toast-msg[data-conn]").forEach(function (m) { m.remove(); });
  }
  document.addEventListener("htmx:sendError", function () {
    connection(false);
    var t = $("#toast");
    if (t) t.innerHTML = '<div class="toast-msg" data-conn="1"><span>desk did not answer; your last action was not done. Try again once it is back.</span></div>';
    // Without an event stream on the page, find out by asking.
    if (!$("[sse-connect]")) probe();
  });
  var probing = null;
  function probe() {
    if (probing) return;
    probing = setInterval(function () {
      fetch("/nav/unread", { credentials: "same-origin" }).then(function (r) {
        if (r.status < 500) { clearInterval(probing); probing = null; connection(true); }
      }, function () { /* still down */ });
    }, 2000);
  }
  document.addEventListener("htmx:sseError", function (e) { if (e.target && e.target.id === "sse-sink") connection(false); });
  document.addEventListener("htmx:sseOpen", function (e) { if (e.target && e.target.id === "sse-sink") connection(true); });
  // A reconnect resumes after the last event the page applied: the stream
  // URL is kept up to date, since a new EventSource sends no Last-Event-ID.
  document.addEventListener("htmx:sseMessage", function (e) {
    var sink = e.target;
    if (!sink || sink.id !== "sse-sink" || !e.detail || !e.detail.lastEventId) return;
    var ids = String(e.detail.lastEventId).split("-");
    var u = new URL(sink.getAttribute("sse-connect"), location.href);
    u.searchParams.set("after", ids[0]);
    if (ids[1]) u.searchParams.set("tseq", ids[1]);
    sink.setAttribute("sse-connect", u.pathname + u.search);
  });
  // The page title follows the session's title (renamed anywhere).
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    // The event's target is the node that was replaced: read the new one.
    var t = e.detail && e.detail.target;
    var h = $("#ses-title");
    if (t && t.id === "ses-title" && h) document.title = h.textContent + " · desk";
  });

  // The Archived group remembers whether it was open.
  var archived = $("#archived-group");
  if (archived) {
    if (localStorage.getItem("desk.archived.open") === "1") archived.open = true;
    archived.addEventListener("toggle", function () { localStorage.setItem("desk.archived.open", archived.open ? "1" : "0"); });
  }

  // A redraw that would change nothing is skipped. Every queue, run and
  // sidebar event redraws its whole region; replacing identical nodes
  // would only lose a click that lands mid-swap, or text typed into a card.
  // A region rendered at an older event seq than the one shown (data-at)
  // is skipped too: a slow answer to a POST must not undo the stream's
  // newer redraw (see web/stamp.go).
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var d = e.detail, t = d.target, f = d.fragment;
    if (!t || !f || f.childElementCount !== 1) return;
    var n = f.firstElementChild;
    if (!n.id || n.id !== t.id) return;
    var at = n.getAttribute("data-at"), shown = t.getAttribute("data-at");
    if (at !== null && shown !== null && +at < +shown) { d.shouldSwap = false; return; }
    var c = withoutHtmxState(t);
    if (at !== null) c.setAttribute("data-at", at);
    if (n.isEqualNode(c)) {
      d.shouldSwap = false;
      if (at !== null) t.setAttribute("data-at", at);
    }
  });
  // withoutHtmxState is a copy of el without htmx's transient classes
  // (htmx-request on the button just clicked, htmx-settling…), which the
  // server's render never has.
  function withoutHtmxState(el) {
    var c = el.cloneNode(true);
    [c].concat(Array.prototype.slice.call(c.querySelectorAll("[class*='htmx-']"))).forEach(function (x) {
      Array.prototype.slice.call(x.classList).forEach(function (k) {
        if (k.indexOf("htmx-") === 0) x.classList.remove(k);
      });
      if (x.getAttribute("class") === "") x.removeAttribute("class");
    });
    return c;
  }

  // New content from htmx (answers and the event stream).
  if (window.htmx) {
    htmx.onLoad(function (el) { addCopyButtons(el); });
  }

  // ---- A question card: typing an answer of one's own chooses it, so
  // what is sent is what the card shows chosen.
  document.addEventListener("input", function (e) {
    var t = e.target;
    if (!t || !t.matches || !t.matches("[data-custom-answer]")) return;
    var r = t.parentElement && t.parentElement.querySelector("[data-custom-choice]");
    if (r && t.value.trim() !== "") r.checked = true;
  });

  // ---- Logs: follow the tail, mark what is shown as seen.
  // A warning or error is read once it has been in view. The server keeps
  // one seen mark per viewer (every entry up to it is read), so the mark
  // moves to just below the oldest entry of the list not yet seen; it
  // moves only on the unfiltered list, where no unread entry is hidden.
  var readSent = 0;
  function markRead() {
    var list = $("#log-entries");
    if (!list || !list.hasAttribute("data-mark-read")) return;
    var rows = $all("#log-entries > li[data-seq]");
    var upto = 0;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].classList.contains("unread")) break;
      upto = Math.max(upto, +rows[i].dataset.seq);
    }
    if (upto <= readSent) return;
    readSent = upto;
    fetch("/logs/seen", {
      method: "POST", credentials: "same-origin", body: "seq=" + upto,
      headers: { "X-CSRF-Token": csrf, "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded" }
    }).then(function (r) { return r.ok ? r.text() : ""; }).then(function (html) {
      var nav = $("#nav-unread");
      if (html && nav) { nav.outerHTML = html; var n = $("#nav-unread"); if (n) htmx.process(n); }
    }, function () { readSent = 0; });
  }
  var readTimer = null;
  var seenRows = window.IntersectionObserver ? new IntersectionObserver(function (es) {
    es.forEach(function (en) {
      if (!en.isIntersecting) return;
      en.target.classList.remove("unread");
      en.target.classList.add("read");
      seenRows.unobserve(en.target);
    });
    clearTimeout(readTimer);
    readTimer = setTimeout(markRead, 300);
  }, { threshold: 0.5 }) : null;
  function watchRows() {
    if (!seenRows) return;
    $all("#log-entries > li.unread:not([data-watched])").forEach(function (li) { li.setAttribute("data-watched", ""); seenRows.observe(li); });
  }
  watchRows();
  document.addEventListener("htmx:afterSwap", watchRows);
  // Only so many rows stay on the page: the oldest go as new ones come.
  // The view does not jump when they do: the browser's scroll anchoring
  // keeps the rows in view where they were.
  var maxLogRows = 2000;
  document.addEventListener("htmx:sseMessage", function (e) {
    var list = e.target;
    if (list && list.id === "log-entries") {
      watchRows();
      while (list.children.length > maxLogRows) list.firstElementChild.remove();
      var follow = $("#follow");
      if (!follow || follow.checked) list.lastElementChild && list.lastElementChild.scrollIntoView({ block: "end" });
    }
  });
  document.addEventListener("htmx:configRequest", function (e) {
    if (e.detail.elt && e.detail.elt.id === "mark-seen") {
      var max = 0;
      $all("#log-entries > li[data-seq]").forEach(function (li) { max = Math.max(max, +li.dataset.seq); });
      if (max > 0) e.detail.parameters.seq = String(Math.max(max, +e.detail.parameters.seq || 0));
    }
  });

  // ---- The command palette: Ctrl/Cmd+K finds sessions, threads and
  // actions: every element marked data-palette on the page, grouped by its
  // data-palette-section, with its shortcut (data-palette-key) shown. A
  // leading ">" switches to command mode (the data-palette-cmd entries);
  // there, text that matches no command + Enter starts a new session with
  // that text as its first message.
  var palette = $("#palette");
  var input = $("#palette-input");
  var list = $("#palette-list");
  var items = [];
  var selected = 0;
  var sectionOrder = ["Actions", "Go to", "Sessions", "Threads", "Workspaces"];
  function entries() {
    var seen = {};
    return $all("[data-palette]").filter(function (el) {
      var key = el.dataset.palette + "|" + (el.getAttribute("href") || el.getAttribute("hx-post") || "");
      if (seen[key]) return false;
      seen[key] = true;
      return true;
    }).map(function (el) {
      return { label: el.dataset.palette, el: el, section: el.dataset.paletteSection || "Go to",
        key: el.dataset.paletteKey || "", cmd: el.hasAttribute("data-palette-cmd") };
    });
  }
  function commandMode() { return input.value.replace(/^\s+/, "").charAt(0) === ">"; }
  function query() { return input.value.trim().replace(/^>\s*/, "").trim().toLowerCase(); }
  function renderPalette() {
    var cmd = commandMode(), q = query();
    items = entries().filter(function (it) {
      return (!cmd || it.cmd) && it.label.toLowerCase().indexOf(q) >= 0;
    });
    items.sort(function (a, b) { return sectionOrder.indexOf(a.section) - sectionOrder.indexOf(b.section); });
    items = items.slice(0, 50);
    if (cmd && q !== "" && palette.dataset.create) {
      var text = input.value.trim().replace(/^>\s*/, "");
      items.push({ label: "New session: \u201c" + text + "\u201d", section: "Start", create: text, key: "" });
    }
    selected = Math.min(selected, Math.max(items.length - 1, 0));
    list.innerHTML = "";
    var last = null;
    items.forEach(function (it, i) {
      if (it.section !== last) {
        last = it.section;
        var h = document.createElement("li");
        h.className = "palette-section";
        h.setAttribute("role", "presentation");
        h.textContent = it.section;
        list.appendChild(h);
      }
      var li = document.createElement("li");
      li.setAttribute("role", "option");
      li.id = "palette-opt-" + i;
      if (it.create !== undefined) li.dataset.create = "1";
      var label = document.createElement("span");
      label.textContent = it.label;
      li.appendChild(label);
      if (it.key) {
        var k = document.createElement("kbd");
        k.className = "palette-key";
        k.textContent = it.key.toUpperCase();
        k.title = "Shortcut: " + it.key.toUpperCase() + " (outside a text field)";
        li.appendChild(k);
      }
      li.setAttribute("aria-selected", i === selected ? "true" : "false");
      li.addEventListener("click", function () { go(i); });
      list.appendChild(li);
    });
    input.setAttribute("aria-activedescendant", items.length ? "palette-opt-" + selected : "");
  }
  function run(el) {
    if (el.tagName === "A") location.href = el.getAttribute("href");
    else el.click(); // a row-menu button: htmx sends its request
  }
  function go(i) {
    var it = items[i];
    if (!it) return;
    palette.close();
    if (it.create !== undefined) createSession(it.create);
    else run(it.el);
  }
  // createSession starts a session with text as its first message, then
  // opens it.
  function createSession(text) {
    var body = new URLSearchParams();
    body.set("first_message", text);
    fetch(palette.dataset.create, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded" }
    }).then(function (r) {
      var to = r.headers.get("HX-Redirect");
      if (r.ok && to) { location.href = to; return; }
      return r.text().then(function (html) {
        var t = $("#toast");
        if (t) t.innerHTML = html;
      });
    }, function () { connection(false); });
  }
  function openPalette(prefix) {
    if (!palette) return;
    if (palette.open) { // a shortcut switches the open palette's mode
      input.value = prefix || "";
      selected = 0;
      renderPalette();
      input.focus();
      return;
    }
    input.value = prefix || "";
    selected = 0;
    renderPalette();
    palette.showModal();
    input.focus();
  }
  if (palette) {
    input.addEventListener("input", function () { selected = 0; renderPalette(); });
    input.addEventListener("keydown", function (e) {
      if (e.key === "ArrowDown") { e.preventDefault(); selected = Math.min(selected + 1, items.length - 1); renderPalette(); }
      else if (e.key === "ArrowUp") { e.preventDefault(); selected = Math.max(selected - 1, 0); renderPalette(); }
      else if (e.key === "Enter") { e.preventDefault(); go(selected); }
    });
    var btn = $("#palette-open");
    if (btn) btn.addEventListener("click", function () { openPalette(""); });
  }
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  document.addEventListener("keydown", function (e) {
    // As svvy names them: Ctrl/Cmd+Shift+P opens the palette in command
    // mode (">" typed), Ctrl/Cmd+P as quick-open (empty; the browser's
    // Print is not what a press means here); Ctrl/Cmd+K stays. They work
    // while typing in the composer too.
    if ((e.ctrlKey || e.metaKey) && !e.altKey) {
      var key = e.key.toLowerCase();
      if (key === "p" || (key === "k" && !e.shiftKey)) {
        e.preventDefault();
        openPalette(key === "p" && e.shiftKey ? "> " : "");
        return;
      }
    }
    // The shortcuts the palette shows work outside text fields, without
    // modifiers.
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target) || (palette && palette.open)) return;
    var k = e.key.toLowerCase();
    var it = entries().filter(function (x) { return x.key === k; })[0];
    if (it) { e.preventDefault(); run(it.el); }
  });
})();
