// The reid page: plain JavaScript, no network beyond this server. Every name and message
// from the server is shown as text (textContent), never as markup.
"use strict";

const state = { key: sessionStorage.getItem("reid-key") || "", gallery: "", offset: 0, follow: null };
const $ = (id) => document.getElementById(id);

function headers() {
  return { Authorization: "Bearer " + state.key };
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
    const message = data && data.error ? data.error.message : response.statusText;
    throw new Error(response.status + ": " + message);
  }
  return data;
}

function say(text, error) {
  const status = $("status");
  status.textContent = text;
  status.className = error ? "error" : "";
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

// ------------------------------------------------------------------ connecting

async function connect(event) {
  if (event) event.preventDefault();
  state.key = $("key").value.trim();
  sessionStorage.setItem("reid-key", state.key);
  try {
    const data = await api("GET", "/v1/galleries");
    const select = $("gallery");
    select.replaceChildren(...data.galleries.map((g) => {
      const option = element("option", g.name + " (" + g.identities + " people, " + g.items + " photos)");
      option.value = g.name;
      return option;
    }));
    select.disabled = data.galleries.length === 0;
    state.gallery = select.value;
    say(data.galleries.length ? "connected" : "connected; no gallery to show", false);
  } catch (error) {
    say(error.message, true);
  }
}

// ------------------------------------------------------------------ search

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

async function search(file) {
  if (!file || !state.gallery) return;
  const canvas = $("search-canvas");
  const picture = await createImageBitmap(file);
  canvas.width = picture.width;
  canvas.height = picture.height;
  const context = canvas.getContext("2d");
  context.drawImage(picture, 0, 0);
  const form = new FormData();
  form.append("image", file, file.name);
  const list = $("search-subjects");
  list.replaceChildren();
  try {
    const answer = await api("POST", galleryPath("/search"), form);
    const t = answer.threshold;
    $("search-threshold").textContent = "threshold " + t.value.toFixed(3) + " (" + t.source + (t.detail ? ", " + t.detail : "") + ")";
    if (!answer.subjects.length) list.append(element("li", "nobody found in this photo", "note"));
    answer.subjects.forEach((subject, n) => {
      const known = subject.decision === "known";
      const label = known ? subject.identity : "unknown";
      drawBox(context, subject);
      const item = element("li", null, "subject");
      item.append(element("span", "#" + (n + 1) + " ", "note"), element("span", label, known ? "known" : "unknown"));
      if (subject.distance !== null) item.append(element("span", " distance " + subject.distance.toFixed(3)));
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
    say("searched " + file.name, false);
  } catch (error) {
    say(error.message, true);
  }
}

// ------------------------------------------------------------------ enrol

async function enrol(event) {
  event.preventDefault();
  const identity = $("enrol-identity").value;
  const form = new FormData();
  for (const file of $("enrol-files").files) form.append("images", file, file.name);
  const body = $("enrol-outcome").querySelector("tbody");
  body.replaceChildren();
  try {
    const answer = await api("POST", galleryPath("/identities/" + segment(identity) + "/images"), form);
    answer.files.forEach((file) => {
      const row = element("tr");
      row.append(element("td", file.name), element("td", file.outcome, "outcome " + file.outcome), element("td", file.reason || ""));
      body.append(row);
    });
    say("enrolled " + answer.added + " of " + answer.files.length + " photos of " + identity, false);
  } catch (error) {
    say(error.message, true);
  }
}

// ------------------------------------------------------------------ people

async function people(more) {
  if (!state.gallery) return;
  state.offset = more ? state.offset : 0;
  const list = $("people-list");
  if (!more) list.replaceChildren();
  try {
    const page = await api("GET", galleryPath("/identities?limit=50&offset=" + state.offset));
    $("people-total").textContent = page.total + " people";
    for (const summary of page.identities) list.append(await person(summary));
    state.offset += page.identities.length;
    $("people-more").hidden = state.offset >= page.total;
  } catch (error) {
    say(error.message, true);
  }
}

async function person(summary) {
  const entry = element("li");
  entry.dataset.identity = summary.identity;
  const label = visible(summary.identity);
  const name = element("div", label, "name");
  entry.append(name, element("div", summary.items + " photos", "note"));
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
      say("renamed " + label + " to " + visible(next), false);
      people(false);
    } catch (error) {
      say(error.message, true);
    }
  };
  const remove = element("button", "Delete");
  remove.className = "delete";
  remove.onclick = async () => {
    if (!confirm("Delete " + label + " and all " + summary.items + " photos?")) return;
    try {
      const done = await api("DELETE", path);
      say("deleted " + visible(done.deleted) + " (" + done.items + " photos)", false);
      entry.remove();
    } catch (error) {
      say(error.message, true);
    }
  };
  entry.append(rename, remove);
  return entry;
}

// ------------------------------------------------------------------ verify

async function verify(event) {
  event.preventDefault();
  const form = new FormData();
  form.append("image", $("verify-a").files[0]);
  if ($("verify-b").files.length) form.append("other", $("verify-b").files[0]);
  if ($("verify-identity").value) form.append("identity", $("verify-identity").value);
  try {
    const answer = await api("POST", galleryPath("/verify"), form);
    const t = answer.threshold;
    $("verify-result").textContent = (answer.same ? "same" : "different") + ": distance " + answer.distance.toFixed(3) +
      (answer.same ? " <= " : " > ") + "threshold " + t.value.toFixed(3) + " (" + t.source + ")";
    $("verify-result").className = answer.same ? "known" : "unknown";
  } catch (error) {
    say(error.message, true);
  }
}

// ------------------------------------------------------------------ watches

async function watches() {
  const list = $("watches-list");
  list.replaceChildren();
  try {
    const data = await api("GET", "/v1/watches");
    if (!data.watches.length) list.append(element("li", "no watch in this server", "note"));
    data.watches.forEach((watch) => {
      const entry = element("li", watch.gallery + ": " + watch.source + " (" + watch.state + ", " + watch.frames + " frames, " + watch.fps.toFixed(1) + " frames/s) ");
      const follow = element("button", "Follow");
      follow.onclick = () => followWatch(watch.id, watch.source);
      entry.append(follow);
      list.append(entry);
    });
  } catch (error) {
    say(error.message, true);
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
    if (error.name !== "AbortError") say(error.message, true);
  }
}

// ------------------------------------------------------------------ wiring

document.querySelectorAll("nav button").forEach((button) => {
  button.onclick = () => {
    document.querySelectorAll("nav button, .tab").forEach((node) => node.classList.remove("active"));
    button.classList.add("active");
    $(button.dataset.tab).classList.add("active");
    if (button.dataset.tab === "people") people(false);
    if (button.dataset.tab === "watches") watches();
  };
});
$("connect").onsubmit = connect;
$("gallery").onchange = () => { state.gallery = $("gallery").value; thumbnails.clear(); };
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
if (state.key) {
  $("key").value = state.key;
  connect();
}
