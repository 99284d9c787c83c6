// The reid page: plain JavaScript, no network beyond this server. Every name and message
// from the server is shown as text (textContent), never as markup. Images are sent to the
// server as they are (the server decodes them and words every refusal); the browser only
// draws what it can show.
"use strict";

const KEY = "reid-key";
const state = { key: "", gallery: "", galleries: [], admin: false, offset: 0, follow: null, pending: null };
const $ = (id) => document.getElementById(id);

// The key lives in this tab (sessionStorage) unless "remember" is ticked (localStorage).
function storedKey() {
  return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
}

function storeKey(key, remember) {
  sessionStorage.setItem(KEY, key);
  if (remember) localStorage.setItem(KEY, key);
  else localStorage.removeItem(KEY);
}

function forgetKey() {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}

function headers() {
  return { Authorization: "Bearer " + state.key };
}

class ServerError extends Error {
  constructor(status, message) {
    super(status + ": " + message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const options = { method, headers: headers() };
  if (body instanceof FormData) options.body = body;
  else if (body !== undefined) {
    options.body = JSON.stringify(body);
    options.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, options);
  const kind = response.headers.get("content-type") || "";
  const data = kind.startsWith("application/json") ? await response.json() : await response.blob();
  if (!response.ok) {
    // The server's own words: every error it answers is {"error": {"code", "message"}}.
    const message = data && data.error ? data.error.message : response.statusText;
    throw new ServerError(response.status, message);
  }
  return data;
}

// Each tab has its own status line; "status" (the header's) is the connection's.
function say(where, text, error) {
  const status = $(where === "connection" ? "status" : where + "-status");
  status.textContent = text;
  status.className = (where === "connection" ? "" : "status ") + (error ? "error" : text ? "ok" : "");
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

// One path segment: a browser turns "." and ".." (also written %2e) into a move up the
// path, so such a name is refused here rather than sent somewhere else.
function segment(text) {
  if (/^(\.|%2e){1,2}$/i.test(text)) throw new Error(JSON.stringify(text) + " is not a name (see the naming rule)");
  return encodeURIComponent(text);
}

// A name stored before the naming rule may hold invisible or control characters: they are
// shown as escapes, so that what is shown is all the name is.
function visible(text) {
  return text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => "\\u" + c.codePointAt(0).toString(16).padStart(4, "0"));
}

function galleryPath(rest) {
  return "/v1/galleries/" + segment(state.gallery) + rest;
}

function plural(n, one, many) {
  return n + " " + (n === 1 ? one : many);
}

const thumbnails = new Map();
async function thumbnail(item) {
  const image = element("img", null, "thumb");
  image.alt = "item " + item;
  if (!thumbnails.has(item)) {
    thumbnails.set(item, api("GET", galleryPath("/items/" + item + "/thumbnail")).then((blob) => URL.createObjectURL(blob), () => ""));
  }
  const url = await thumbnails.get(item);
  if (url) image.src = url;
  return image;
}

// Each action needs a connection and a gallery: the tab says so instead of doing nothing.
function ready(where) {
  if (!state.key || !state.galleries.length && where !== "admin") {
    say(where, state.key ? "no gallery to work on: the admin makes one in the Admin tab"
      : "connect first: paste a key above and press Connect", true);
    return false;
  }
  return true;
}

// ------------------------------------------------------------------ connecting

async function connect(event) {
  if (event) event.preventDefault();
  state.key = $("key").value.trim();
  if (!state.key) return;
  say("connection", "connecting…", false);
  try {
    await galleries();
  } catch (error) {
    if (error.status === 401) forgetKey();
    state.key = "";
    document.body.classList.remove("connected");
    say("connection", error.message, true);
    return;
  }
  storeKey(state.key, $("remember").checked);
  document.body.classList.add("connected");
  $("disconnect").hidden = false;
  // Only the admin key may list keys: it opens the Admin tab.
  state.admin = await api("GET", "/v1/keys").then(() => true, () => false);
  document.querySelector("nav button[data-tab=admin]").hidden = !state.admin;
  const count = state.galleries.length;
  say("connection", count ? "connected" + (state.admin ? " as admin" : "") + ": " + plural(count, "gallery", "galleries")
    : "connected; no gallery yet" + (state.admin ? ": make one in the Admin tab" : ""), false);
  if (state.admin) admin();
  if (state.pending) {
    const file = state.pending;
    state.pending = null;
    search(file);
  }
}

function disconnect() {
  forgetKey();
  state.key = "";
  state.galleries = [];
  state.admin = false;
  $("key").value = "";
  $("gallery").replaceChildren(element("option", "none yet"));
  $("gallery").disabled = true;
  $("disconnect").hidden = true;
  document.querySelector("nav button[data-tab=admin]").hidden = true;
  document.body.classList.remove("connected");
  say("connection", "key forgotten", false);
}

// The galleries and their counts, again after every write (the selection is kept).
async function galleries() {
  const data = await api("GET", "/v1/galleries");
  state.galleries = data.galleries;
  const select = $("gallery");
  const keep = state.gallery;
  select.replaceChildren(...data.galleries.map((g) => {
    const option = element("option", g.name + " (" + plural(g.identities, "person", "people") + ", " + plural(g.items, "photo", "photos") + ")");
    option.value = g.name;
    return option;
  }));
  if (!data.galleries.length) select.append(element("option", "none yet"));
  select.disabled = data.galleries.length === 0;
  if (data.galleries.some((g) => g.name === keep)) select.value = keep;
  state.gallery = data.galleries.length ? select.value : "";
  describeGallery();
  if (state.admin) adminGalleries();
}

// How this gallery finds the subjects of a photo, in one line.
function describeGallery() {
  const gallery = state.galleries.find((g) => g.name === state.gallery);
  const mode = $("search-mode");
  if (!gallery) {
    mode.textContent = "";
    return;
  }
  const whole = gallery.detect === "none" || (gallery.detect === "auto" && !gallery.detector);
  if (gallery.model_kind === "person" && whole) {
    mode.textContent = "This gallery takes each photo whole, as one person (detect: " + gallery.detect + "): "
      + "its enrolments are usually crops of one person, in which a person detector often finds nobody. "
      + "To search each person of a scene, serve it with detect: person in serve.yaml.";
  } else {
    mode.textContent = "Subjects found by: " + gallery.detect + (gallery.detector ? " (" + gallery.detector + ")" : "")
      + "; a photo with nobody found: " + gallery.no_face + ".";
  }
}
// A subject's box, and its label where the server laid it out (the same layout as the
// annotated video's: inside the photo, over no other label; none where it fits nowhere).
function drawBox(context, subject) {
  const [x, y, w, h] = subject.box;
  const label = subject.label;
  context.lineWidth = label ? label.line : 1;
  context.strokeStyle = label ? label.colour : "#aaaaaa";
  context.strokeRect(x, y, w, h);
  if (!label) return;
  const [lx, ly, lw, lh] = label.rect;
  context.fillStyle = label.fill;
  context.fillRect(lx, ly, lw, lh);
  context.strokeStyle = label.colour;
  context.lineWidth = 1;
  context.strokeRect(lx + 0.5, ly + 0.5, lw - 1, lh - 1);
  // Letters of the server's cap height (a sans-serif capital is about 0.7 of the font
  // size), squeezed into the label if the browser's font runs wider than the layout's.
  const [ox, oy] = label.origin;
  context.font = Math.round(label.font_px / 0.7) + "px sans-serif";
  context.textBaseline = "alphabetic";
  context.fillStyle = label.text_colour;
  context.fillText(label.text, ox, oy, lw - 2 * (ox - lx));
}

// ------------------------------------------------------------------ search

function clearSearch() {
  $("search-figure").hidden = true;
  $("search-subjects").replaceChildren();
  $("search-threshold").textContent = "";
}

// A picture the browser can show, or null (the server reads formats some browsers do not: PGM).
async function picture(file) {
  try {
    return await createImageBitmap(file);
  } catch {
    return null;
  }
}

async function search(file) {
  if (!file) return;
  clearSearch();
  if (!state.key) {
    state.pending = file;
    say("search", "connect first: paste a key above and press Connect; " + file.name + " is searched as soon as you are connected", true);
    return;
  }
  if (!ready("search")) return;
  say("search", "searching " + file.name + "…", false);
  const form = new FormData();
  form.append("image", file, file.name);
  let answer;
  try {
    answer = await api("POST", galleryPath("/search"), form);
  } catch (error) {
    say("search", error.message, true);
    return;
  }
  const shown = await picture(file);
  const canvas = $("search-canvas");
  const context = canvas.getContext("2d");
  if (shown) {
    canvas.width = shown.width;
    canvas.height = shown.height;
    context.drawImage(shown, 0, 0);
  }
  $("search-figure").hidden = !shown;
  const t = answer.threshold;
  $("search-threshold").textContent = "threshold " + t.value.toFixed(3) + " (" + t.source + (t.detail ? ", " + t.detail : "") + ")";
  const list = $("search-subjects");
  if (!answer.subjects.length) list.append(element("li", "nobody found in this photo", "note"));
  answer.subjects.forEach((subject, n) => {
    const known = subject.decision === "known";
    if (shown) drawBox(context, subject);
    const item = element("li", null, "subject");
    const swatch = element("span", null, "swatch");
    if (subject.label) swatch.style.background = subject.label.colour;
    item.append(swatch, element("span", "#" + (n + 1) + " ", "note"), element("span", known ? subject.identity : "unknown", known ? "known" : "unknown"));
    if (subject.distance !== null) item.append(element("span", " distance " + subject.distance.toFixed(3), "note"));
    const matches = element("ul", null, "matches");
    subject.matches.forEach((match) => {
      const entry = element("li");
      thumbnail(match.item).then((image) => entry.prepend(image));
      entry.append(element("div", match.identity), element("div", match.distance.toFixed(3), "note"));
      matches.append(entry);
    });
    item.append(matches);
    list.append(item);
  });
  const known = answer.subjects.filter((s) => s.decision === "known").length;
  let line = "searched " + file.name + ": " + plural(answer.subjects.length, "subject", "subjects") + ", " + known + " known";
  if (answer.note) line += "; " + answer.note;
  if (!shown) line += " (this browser cannot show this picture; the answer is below)";
  say("search", line, false);
}

// ------------------------------------------------------------------ enrol

async function enrol(event) {
  event.preventDefault();
  if (!ready("enrol")) return;
  const identity = $("enrol-identity").value;
  const form = new FormData();
  for (const file of $("enrol-files").files) form.append("images", file, file.name);
  const body = $("enrol-outcome").querySelector("tbody");
  body.replaceChildren();
  say("enrol", "enrolling…", false);
  try {
    const answer = await api("POST", galleryPath("/identities/" + segment(identity) + "/images"), form);
    answer.files.forEach((file) => {
      const row = element("tr");
      row.append(element("td", file.name), element("td", file.outcome, "outcome " + file.outcome), element("td", file.reason || ""));
      body.append(row);
    });
    say("enrol", "enrolled " + answer.added + " of " + answer.files.length + " photos of " + identity, answer.added === 0);
    await galleries();
  } catch (error) {
    say("enrol", error.message, true);
  }
}

// ------------------------------------------------------------------ people

async function people(more) {
  if (!ready("people")) return;
  state.offset = more ? state.offset : 0;
  const list = $("people-list");
  if (!more) list.replaceChildren();
  try {
    const page = await api("GET", galleryPath("/identities?limit=50&offset=" + state.offset));
    $("people-total").textContent = plural(page.total, "person", "people") + " in " + state.gallery;
    if (!page.total) list.append(element("li", "nobody enrolled yet: add a person in the Enrol tab", "empty"));
    for (const summary of page.identities) list.append(await person(summary));
    state.offset += page.identities.length;
    $("people-more").hidden = state.offset >= page.total;
    say("people", "", false);
  } catch (error) {
    say("people", error.message, true);
  }
}

async function person(summary) {
  const entry = element("li");
  entry.dataset.identity = summary.identity;
  const label = visible(summary.identity);
  const name = element("div", label, "name");
  entry.append(name, element("div", plural(summary.items, "photo", "photos"), "note"));
  // By id: a name such as ".." would be a path once the browser normalises the URL.
  const path = galleryPath("/ids/" + summary.id);
  api("GET", path).then(async (detail) => {
    if (detail.items.length) entry.prepend(await thumbnail(detail.items[0].id));
  }, () => {});
  const rename = element("button", "Rename");
  rename.onclick = async () => {
    const next = prompt("New name for " + label, summary.identity);
    if (!next || next === summary.identity) return;
    try {
      await api("PATCH", path, { name: next });
      say("people", "renamed " + label + " to " + visible(next), false);
      people(false);
    } catch (error) {
      say("people", error.message, true);
    }
  };
  const remove = element("button", "Delete");
  remove.className = "delete";
  remove.onclick = async () => {
    if (!confirm("Delete " + label + " and all " + summary.items + " photos?")) return;
    try {
      const done = await api("DELETE", path);
      entry.remove();
      await galleries();
      say("people", "deleted " + visible(done.deleted) + " (" + done.items + " photos)", false);
    } catch (error) {
      say("people", error.message, true);
    }
  };
  entry.append(element("div", null, "actions"));
  entry.lastChild.append(rename, remove);
  return entry;
}

// ------------------------------------------------------------------ verify

async function verify(event) {
  event.preventDefault();
  if (!ready("verify")) return;
  const form = new FormData();
  form.append("image", $("verify-a").files[0]);
  if ($("verify-b").files.length) form.append("other", $("verify-b").files[0]);
  if ($("verify-identity").value) form.append("identity", $("verify-identity").value);
  $("verify-result").textContent = "";
  try {
    const answer = await api("POST", galleryPath("/verify"), form);
    const t = answer.threshold;
    $("verify-result").textContent = (answer.same ? "same" : "different") + ": distance " + answer.distance.toFixed(3) +
      (answer.same ? " <= " : " > ") + "threshold " + t.value.toFixed(3) + " (" + t.source + ")";
    $("verify-result").className = answer.same ? "known" : "unknown";
    say("verify", "verified", false);
  } catch (error) {
    say("verify", error.message, true);
  }
}

// ------------------------------------------------------------------ watches

async function watches() {
  if (!ready("watches")) return;
  const list = $("watches-list");
  list.replaceChildren();
  try {
    const data = await api("GET", "/v1/watches");
    if (!data.watches.length) list.append(element("li", "no watch in this server" + (state.admin ? ": start one in the Admin tab" : ""), "empty"));
    data.watches.forEach((watch) => {
      const entry = element("li", watch.gallery + ": " + watch.source + " (" + watch.state + ", " + watch.frames + " frames, " + watch.fps.toFixed(1) + " frames/s) ");
      if (watch.error) entry.append(element("span", watch.error, "error"));
      const follow = element("button", "Follow");
      follow.onclick = () => followWatch(watch.id, watch.source);
      entry.append(follow);
      list.append(entry);
    });
    say("watches", "", false);
  } catch (error) {
    say("watches", error.message, true);
  }
}

// EventSource cannot send a key, so the stream is read with fetch.
async function followWatch(id, source) {
  if (state.follow) state.follow.abort();
  state.follow = new AbortController();
  $("watch-title").textContent = "events of " + source;
  const list = $("watch-events");
  list.replaceChildren();
  try {
    const response = await fetch("/v1/watches/" + encodeURIComponent(id) + "/events", { headers: headers(), signal: state.follow.signal });
    if (!response.ok) throw new Error(response.status + ": cannot follow this watch");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const kind = (block.match(/^event: (.*)$/m) || [])[1];
        const data = (block.match(/^data: (.*)$/m) || [])[1];
        if (!kind || !data) continue;
        const event = JSON.parse(data);
        const text = kind === "done" ? "done: " + event.state + ", " + event.frames + " frames"
          : kind + " track " + event.track + ": " + (event.identity === null ? "unknown" : event.identity) +
            (event.distance === null ? "" : " (" + event.distance.toFixed(3) + ")") +
            (event.frames ? ", " + event.frames + " frames" : "");
        list.append(element("li", text, event.identity ? "known" : kind === "done" ? "" : "unknown"));
      }
    }
  } catch (error) {
    if (error.name !== "AbortError") say("watches", error.message, true);
  }
}

// ------------------------------------------------------------------ admin

function options(select, names) {
  const keep = select.value;
  select.replaceChildren(...names.map((name) => {
    const option = element("option", name);
    option.value = name;
    return option;
  }));
  if (names.includes(keep)) select.value = keep;
}

function adminGalleries() {
  const names = state.galleries.map((g) => g.name);
  options($("new-key-gallery"), names);
  options($("new-watch-gallery"), names);
  const body = $("admin-galleries").querySelector("tbody");
  body.replaceChildren(...state.galleries.map((g) => {
    const row = element("tr");
    row.append(element("td", g.name), element("td", g.model || "(not served)"), element("td", g.identities),
      element("td", g.items), element("td", g.detect + (g.detector ? " (" + g.detector + ")" : "")));
    return row;
  }));
  if (!state.galleries.length) {
    const row = element("tr", null, "empty");
    row.append(element("td", "no gallery yet: create one above"));
    body.append(row);
  }
}

async function admin() {
  try {
    const served = await api("GET", "/v1/ready");
    options($("new-gallery-model"), served.models.map((m) => m.name));
    adminGalleries();
    await adminKeys();
  } catch (error) {
    say("admin", error.message, true);
  }
}

async function adminKeys() {
  const data = await api("GET", "/v1/keys");
  const body = $("admin-keys").querySelector("tbody");
  body.replaceChildren(...data.keys.map((key) => {
    const row = element("tr");
    const revoke = element("button", "Revoke", "delete");
    revoke.onclick = async () => {
      if (!confirm("Revoke key " + key.id + " of " + key.gallery + "?")) return;
      try {
        await api("DELETE", "/v1/keys/" + encodeURIComponent(key.id));
        say("admin", "revoked key " + key.id, false);
        await adminKeys();
      } catch (error) {
        say("admin", error.message, true);
      }
    };
    row.append(element("td", key.id), element("td", key.gallery), element("td", key.scopes.join(", ")), element("td", key.created), element("td"));
    row.lastChild.append(revoke);
    return row;
  }));
}

async function createGallery(event) {
  event.preventDefault();
  const name = $("new-gallery").value.trim();
  try {
    const made = await api("POST", "/v1/galleries", { name, model: $("new-gallery-model").value || null, thumbnails: $("new-gallery-thumbnails").checked });
    state.gallery = made.name;
    await galleries();
    say("admin", "created gallery " + made.name + " (model " + made.model + ")", false);
    $("new-gallery").value = "";
  } catch (error) {
    say("admin", error.message, true);
  }
}

async function createKey(event) {
  event.preventDefault();
  const scopes = ["read", "write"].filter((scope) => $("new-key-" + scope).checked);
  const shown = $("new-key");
  shown.hidden = true;
  try {
    const made = await api("POST", "/v1/keys", { gallery: $("new-key-gallery").value, scopes });
    shown.replaceChildren(element("span", "Key for " + made.gallery + " (" + made.scopes.join(", ") + "), shown once: "), element("code", made.key));
    shown.hidden = false;
    say("admin", "created key " + made.id + " for " + made.gallery, false);
    await adminKeys();
  } catch (error) {
    say("admin", error.message, true);
  }
}

async function startWatch(event) {
  event.preventDefault();
  const frames = $("new-watch-frames").value;
  try {
    const made = await api("POST", "/v1/watches", {
      gallery: $("new-watch-gallery").value, source: $("new-watch-source").value, max_frames: frames ? Number(frames) : null,
    });
    say("admin", "started watch " + made.id + " of " + made.source + " on " + made.gallery + " (" + made.state + ")", false);
  } catch (error) {
    say("admin", error.message, true);
  }
}

// ------------------------------------------------------------------ wiring

function show(tab) {
  document.querySelectorAll("#tabs button, .tab").forEach((node) => node.classList.remove("active"));
  document.querySelector("#tabs button[data-tab=" + tab + "]").classList.add("active");
  $(tab).classList.add("active");
  if (tab === "people") people(false);
  if (tab === "watches") watches();
  if (tab === "admin") admin();
}

document.querySelectorAll("#tabs button").forEach((button) => {
  button.onclick = () => show(button.dataset.tab);
});
$("connect").onsubmit = connect;
$("disconnect").onclick = disconnect;
$("gallery").onchange = () => {
  state.gallery = $("gallery").value;
  thumbnails.clear();
  describeGallery();
  clearSearch();
  if ($("people").classList.contains("active")) people(false);
};
$("search-file").onchange = () => search($("search-file").files[0]);
const drop = $("search-drop");
drop.ondragover = (event) => { event.preventDefault(); drop.classList.add("over"); };
drop.ondragleave = () => drop.classList.remove("over");
drop.ondrop = (event) => { event.preventDefault(); drop.classList.remove("over"); search(event.dataTransfer.files[0]); };
$("enrol-form").onsubmit = enrol;
$("people-refresh").onclick = () => people(false);
$("people-more").onclick = () => people(true);
$("verify-form").onsubmit = verify;
$("watches-refresh").onclick = watches;
$("gallery-form").onsubmit = createGallery;
$("key-form").onsubmit = createKey;
$("watch-form").onsubmit = startWatch;
$("remember").checked = Boolean(localStorage.getItem(KEY));
if (storedKey()) {
  $("key").value = storedKey();
  connect();
}
