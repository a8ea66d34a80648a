// tgproxy control panel: everything here goes through the public /v1/ API (docs/api.md).
// Nothing is inserted as HTML: every value is set with textContent or an attribute, since
// labels and domains are operator input and error texts may quote anything.
"use strict";

const S = { token: sessionStorage.getItem("tgproxy-token") || "", timer: null, qrUrl: null };

function $(sel) { return document.querySelector(sel); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (S.token) opts.headers["Authorization"] = "Bearer " + S.token;
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const j = await r.json();
  if (!j.ok) {
    const err = new Error(j.error.code + ": " + j.error.message);
    err.status = r.status;
    throw err;
  }
  return j.data;
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

function when(t) {
  return t === null || t === undefined ? "never" : new Date(t * 1000).toISOString().slice(0, 19) + "Z";
}

function showError(e) { $("#error").textContent = e ? String(e.message || e) : ""; }

function button(text, action, label) {
  const b = el("button", text);
  b.dataset.action = action;
  b.dataset.label = label;
  b.type = "button";
  return b;
}

function row(s) {
  const st = s.stats || {};
  const tr = el("tr");
  tr.dataset.label = s.label;
  if (s.disabled) tr.className = "disabled";
  const cells = [s.label, s.kind, s.domain || "", s.source, s.disabled ? "disabled" : "on"];
  for (const c of cells) tr.appendChild(el("td", c));
  for (const [v, f] of [[st.connections_active, String], [st.connections_total, String],
                        [st.bytes_to_client, bytes], [st.bytes_to_upstream, bytes],
                        [st.quota_used, bytes], [st.quota_left, bytes],
                        [st.unique_ips, String]]) {
    tr.appendChild(el("td", v === undefined ? "–" : f(v), "num"));
  }
  tr.appendChild(el("td", when(st.last_seen)));
  const hs = st.handshakes || {};
  const failed = ["stale", "replay", "limit", "other"].filter(k => hs[k])
    .map(k => hs[k] + " " + k).join(", ");
  tr.appendChild(el("td", (hs.ok || 0) + " ok" + (failed ? ", " + failed : ""), "num"));
  const td = el("td");
  td.appendChild(button("Share", "share", s.label));
  td.appendChild(button(s.disabled ? "Enable" : "Disable", s.disabled ? "enable" : "disable", s.label));
  if (s.source === "api") td.appendChild(button("Rotate", "rotate", s.label));
  if (st.quota_used !== null && st.quota_used !== undefined)
    td.appendChild(button("Reset quota", "reset-quota", s.label));
  if (s.source === "api") td.appendChild(button("Delete", "delete", s.label));
  tr.appendChild(td);
  return tr;
}

async function refresh() {
  try {
    const [list, info] = await Promise.all([api("GET", "/v1/secrets"), api("GET", "/v1/info")]);
    const body = $("#secrets tbody");
    const rows = list.secrets.map(row);
    body.replaceChildren(...rows);
    $("#info").textContent = "v" + info.version + " · generation " + info.generation +
      " · " + info.connections_active + " open";
    const ul = $("#reloads");
    ul.replaceChildren(...info.reloads.recent.map(r => {
      const li = el("li", new Date(r.at * 1000).toISOString() + " " + r.origin + ": " +
                    (r.ok ? "applied" : "refused: " + r.error));
      return li;
    }));
    showError(null);
  } catch (e) {
    if (e.status === 401) return logout("session expired: " + e.message);
    showError(e);
  }
}

async function share(label) {
  const links = await api("GET", "/v1/secrets/" + encodeURIComponent(label) + "/link");
  $("#share-label").textContent = label;
  const a = $("#share-tme");
  a.textContent = links.tme;
  a.href = links.tme.startsWith("https://t.me/") ? links.tme : "#";
  $("#share-tg").textContent = links.tg;
  const r = await fetch(links.qr_svg, { headers: { "Authorization": "Bearer " + S.token } });
  if (!r.ok) throw new Error("QR code: HTTP " + r.status);
  if (S.qrUrl) URL.revokeObjectURL(S.qrUrl);
  S.qrUrl = URL.createObjectURL(await r.blob());
  $("#share-qr").src = S.qrUrl;
  // client addresses are the attacker's choice: text only, like everything else here
  const st = await api("GET", "/v1/secrets/" + encodeURIComponent(label) + "/stats");
  $("#share-clients").replaceChildren(...(st.clients || []).map(c =>
    el("li", c.address + " · last seen " + when(c.last_seen))));
  $("#share-ips").textContent = String(st.unique_ips);
  $("#share").hidden = false;
}

async function onAction(ev) {
  const b = ev.target.closest("button[data-action]");
  if (!b) return;
  const { action, label } = b.dataset;
  const path = "/v1/secrets/" + encodeURIComponent(label);
  try {
    if (action === "share") await share(label);
    else if (action === "delete") {
      if (!confirm("Delete " + label + "?")) return;
      await api("DELETE", path);
    } else await api("POST", path + "/" + action);
    await refresh();
  } catch (e) { showError(e); }
}

function num(sel) {
  const v = $(sel).value;
  return v === "" ? undefined : Number(v);
}

async function onCreate(ev) {
  ev.preventDefault();
  const body = { label: $("#c-label").value, kind: $("#c-kind").value };
  if (body.kind === "ee") body.domain = $("#c-domain").value;
  const limits = {};
  for (const [k, sel] of [["quota", "#c-quota"], ["max-connections", "#c-maxconn"],
                          ["max-unique-ips", "#c-maxips"]]) {
    const v = num(sel);
    if (v !== undefined) limits[k] = v;
  }
  if (Object.keys(limits).length) body.limits = limits;
  try {
    const d = await api("POST", "/v1/secrets", body);
    $("#create-form").reset();
    await refresh();
    await share(d.secret.label);
  } catch (e) { showError(e); }
}

function logout(why) {
  S.token = "";
  sessionStorage.removeItem("tgproxy-token");
  clearInterval(S.timer);
  $("#app").hidden = true;
  $("#logout").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = why || "";
}

async function onLogin(ev) {
  if (ev) ev.preventDefault();
  if (ev) S.token = $("#token").value.trim();
  try {
    await api("GET", "/v1/info");
  } catch (e) {
    return logout(e.message);
  }
  sessionStorage.setItem("tgproxy-token", S.token);
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#logout").hidden = false;
  await refresh();
  clearInterval(S.timer);
  S.timer = setInterval(refresh, 2000);
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login-form").addEventListener("submit", onLogin);
  $("#create-form").addEventListener("submit", onCreate);
  $("#secrets").addEventListener("click", onAction);
  $("#logout").addEventListener("click", () => logout(""));
  if (S.token) onLogin(null);
});
