// desk web UI: Copy and Edit on the user's committed messages (edit and
// resend). Edit puts the message's text in the composer and marks the
// message; sending then queues it as a new branch from the message's parent
// (the composer posts edit_of), and the messages it replaces leave the
// page, as they leave the active branch. A non-empty draft is never
// replaced without asking.
(function () {
  "use strict";
  var transcript = document.getElementById("transcript");
  var composer = document.getElementById("composer");
  var ta = document.getElementById("composer-text");
  if (!transcript || !composer || !ta) return;

  function button(label, action, title) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "btn ghost msg-action";
    b.textContent = label;
    b.title = title;
    b.dataset.msgAction = action;
    return b;
  }

  // Every user message in the transcript is committed (queued ones live in
  // the queue region), so each gets the two actions once.
  function decorate(root) {
    var ms = root.querySelectorAll ? root.querySelectorAll("article.msg.user:not(.notification)[id^='m-msg_']") : [];
    Array.prototype.forEach.call(ms, function (m) {
      if (m.querySelector(".msg-actions")) return;
      var bar = document.createElement("div");
      bar.className = "msg-actions";
      bar.appendChild(button("Copy", "copy", "Copy this message"));
      bar.appendChild(button("Edit", "edit", "Edit and resend this message"));
      m.appendChild(bar);
    });
  }
  decorate(transcript);
  new MutationObserver(function () { decorate(transcript); }).observe(transcript, { childList: true, subtree: true });

  function textOf(m) {
    var p = m.querySelector(".plain");
    return p ? p.textContent : "";
  }

  function hidden() {
    var h = composer.querySelector("input[name=edit_of]");
    if (!h) {
      h = document.createElement("input");
      h.type = "hidden";
      h.name = "edit_of";
      composer.appendChild(h);
    }
    return h;
  }

  function banner() {
    var b = document.getElementById("edit-banner");
    if (!b) {
      b = document.createElement("div");
      b.id = "edit-banner";
      b.className = "notice edit-banner";
      b.setAttribute("role", "status");
      composer.insertBefore(b, composer.firstChild);
    }
    return b;
  }

  function clearEdit() {
    hidden().value = "";
    var b = document.getElementById("edit-banner");
    if (b) b.remove();
    Array.prototype.forEach.call(transcript.querySelectorAll(".msg.editing"), function (m) {
      m.classList.remove("editing");
      m.removeAttribute("aria-current");
    });
  }

  function startEdit(m) {
    clearEdit();
    ta.value = textOf(m);
    ta.dispatchEvent(new Event("input", { bubbles: true })); // the draft follows
    hidden().value = m.id.slice(2);
    m.classList.add("editing");
    m.setAttribute("aria-current", "true");
    var b = banner();
    b.textContent = "Editing a sent message: sending starts a new branch from before it; the original stays in the history. ";
    var cancel = button("Cancel edit", "cancel-edit", "Stop editing; the composer keeps its text");
    b.appendChild(cancel);
    ta.focus();
  }

  // askReplace warns before a non-empty draft is replaced: the choice is
  // made in the composer, not in a modal dialog.
  function askReplace(m) {
    var b = banner();
    b.textContent = "The composer holds a draft. Replace it with this message? ";
    b.appendChild(button("Replace draft", "replace-draft", "Put the message in the composer instead of the draft"));
    b.appendChild(button("Keep draft", "keep-draft", "Leave the draft as it is"));
    b.dataset.pending = m.id;
  }

  document.addEventListener("click", function (e) {
    var b = e.target.closest ? e.target.closest("[data-msg-action]") : null;
    if (!b) return;
    var m = b.closest("article.msg");
    switch (b.dataset.msgAction) {
    case "copy":
      var t = textOf(m);
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(t);
      b.textContent = "Copied";
      setTimeout(function () { b.textContent = "Copy"; }, 1500);
      break;
    case "edit":
      if (ta.value.trim() !== "" && ta.value !== textOf(m) && hidden().value === "") askReplace(m);
      else startEdit(m);
      break;
    case "replace-draft":
      var target = document.getElementById(banner().dataset.pending || "");
      if (target) startEdit(target);
      break;
    case "keep-draft":
    case "cancel-edit":
      clearEdit();
      break;
    }
  });

  // The edited message and everything after it are off the active branch
  // once the send succeeds; the new branch arrives through the event
  // stream. What is replaced is taken when the request leaves, not when
  // its answer lands: under load the stream can deliver the new branch's
  // message (even its whole reply) first, and removing "everything after
  // the edited message" then removed the new branch too, for good.
  var replaced = null;
  composer.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt !== composer) return;
    replaced = null;
    var id = hidden().value;
    if (!id) return;
    replaced = [];
    for (var m = document.getElementById("m-" + id); m; m = m.nextElementSibling) {
      if (m.classList.contains("msg")) replaced.push(m);
    }
  });
  composer.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail.elt !== composer || !e.detail.successful || !replaced) return;
    replaced.forEach(function (m) { m.remove(); });
    replaced = null;
    clearEdit();
  });
})();
