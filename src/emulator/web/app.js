// tgbot-emulator web chat. Talks only to this emulator's control API (/control/...):
// lists chats, shows a conversation as Telegram renders it (entities, inline keyboards,
// edits in place, files), sends as the chosen user, and streams raw updates and API calls.
'use strict';

const S = {
  users: [], bots: [], chats: [],
  user: null,          // id of the user we type as
  current: null,       // {kind: 'bot'|'group', id, bot_id, title}
  seq: 0, version: -1,
  shownVersion: null,
  loads: 0, drawn: 0,  // loadMessages requests made and drawn
};

const $ = (sel) => document.querySelector(sel);

async function api(name, body, query) {
  const url = '/control/' + name + (query ? '?' + new URLSearchParams(query) : '');
  const opt = body ? {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify(body)} : {};
  const r = await fetch(url, opt);
  return r.json();
}

function toast(text, alert) {
  if (!text) return;
  if (alert) { window.alert(text); return; }
  const t = $('#toast');
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 2500);
}

function esc(s) {
  return s.replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;',
    "'": '&#39;'}[c]));
}

// Text with entities (UTF-16 offsets, which are JavaScript string indexes) as HTML: split
// into runs with the same set of active entities and wrap each run, so overlaps work.
const WRAP = {
  bold: ['<b>', '</b>'], italic: ['<i>', '</i>'], underline: ['<u>', '</u>'],
  strikethrough: ['<s>', '</s>'], code: ['<code>', '</code>'], pre: ['<pre>', '</pre>'],
  spoiler: ['<span class="spoiler">', '</span>'], blockquote: ['<blockquote>', '</blockquote>'],
  expandable_blockquote: ['<blockquote>', '</blockquote>'],
};

// Links are checked by the emulator as Telegram checks them; the page still makes a link
// only of the schemes Telegram allows (anything else, e.g. a bot's own "url" entity over
// "javascript:...", stays text).
function safeUrl(u) { return typeof u === 'string' && /^(https?|tg|ton):/i.test(u) ? u : null; }

function renderText(text, ents) {
  ents = ents || [];
  const cuts = new Set([0, text.length]);
  for (const e of ents) { cuts.add(e.offset); cuts.add(Math.min(text.length, e.offset + e.length)); }
  const pts = [...cuts].sort((a, b) => a - b);
  let html = '';
  for (let i = 0; i + 1 < pts.length; i++) {
    const a = pts[i], b = pts[i + 1];
    if (a >= b) continue;
    const part = text.slice(a, b);
    let h = esc(part);
    for (const e of ents) {
      if (e.offset > a || e.offset + e.length < b) continue;
      if (WRAP[e.type]) h = WRAP[e.type][0] + h + WRAP[e.type][1];
      else if ((e.type === 'text_link' || e.type === 'url') && safeUrl(e.type === 'url' ? part : e.url))
        h = '<a href="' + esc(e.type === 'url' ? part : e.url) + '" target="_blank" rel="noopener">' + h + '</a>';
      else if (e.type === 'bot_command') h = '<span class="cmd" data-cmd="' + esc(part) + '">' + h + '</span>';
      else if (e.type === 'mention' || e.type === 'hashtag') h = '<span class="cmd">' + h + '</span>';
    }
    html += h;
  }
  return html;
}

function name(u) {
  if (!u) return '';
  return u.first_name + (u.last_name ? ' ' + u.last_name : '');
}

function service(m) {
  const who = name(m.from);
  if (m.new_chat_members) return who + ' joined the group';
  if (m.left_chat_member) return name(m.left_chat_member) + ' left the group';
  if (m.pinned_message) return who + ' pinned a message';
  if (m.new_chat_title) return who + ' changed the title to "' + m.new_chat_title + '"';
  return null;
}

function fileUrl(id) { return '/control/file?file_id=' + encodeURIComponent(id); }

function renderKeyboard(m) {
  const kb = m.reply_markup && m.reply_markup.inline_keyboard;
  if (!kb) return null;
  const box = document.createElement('div');
  box.className = 'kb';
  for (const row of kb) {
    const r = document.createElement('div');
    r.className = 'row';
    for (const b of row) {
      let el;
      if (safeUrl(b.url)) {
        el = document.createElement('a');
        el.href = b.url; el.target = '_blank'; el.rel = 'noopener';
      } else {
        el = document.createElement('button');
        el.type = 'button';
        if (b.callback_data !== undefined) {
          el.dataset.data = b.callback_data;
          el.addEventListener('click', () => press(m, b.callback_data));
        }
      }
      el.textContent = b.text;
      r.appendChild(el);
    }
    box.appendChild(r);
  }
  return box;
}

function renderMessage(m) {
  const div = document.createElement('div');
  const me = m.from && !m.from.is_bot;
  const svc = service(m);
  div.className = 'msg ' + (svc ? 'service-msg' : me ? 'out' : 'in');
  div.dataset.id = m.message_id;
  if (svc) { div.textContent = svc; return div; }
  let html = '';
  if (S.current && S.current.kind === 'group' && m.from) html += '<div class="from">' + esc(name(m.from)) + '</div>';
  if (m.via_bot) html += '<div class="forward">via @' + esc(m.via_bot.username || '') + '</div>';
  if (m.forward_origin) {
    const o = m.forward_origin;
    html += '<div class="forward">Forwarded from ' + esc(o.sender_user ? name(o.sender_user) : o.chat ? o.chat.title || '' : o.sender_user_name || '') + '</div>';
  }
  if (m.reply_to_message) {
    const r = m.reply_to_message;
    html += '<div class="reply">' + esc(name(r.from)) + ': ' + esc((r.text || r.caption || '[media]').slice(0, 80)) + '</div>';
  }
  if (m.photo && m.photo.length) html += '<img alt="photo" src="' + fileUrl(m.photo[m.photo.length - 1].file_id) + '">';
  for (const kind of ['document', 'audio', 'video', 'voice', 'animation']) {
    const f = m[kind];
    if (!f) continue;
    const label = f.file_name || (f.title ? (f.performer ? f.performer + ' - ' : '') + f.title : kind);
    html += '<a class="file" href="' + fileUrl(f.file_id) + '" download="' + esc(f.file_name || kind) + '">' +
      esc(kind) + ': ' + esc(label) + (f.duration ? ' (' + f.duration + ' s)' : '') + '</a>';
  }
  if (m.location) html += '<div class="file">location: ' + m.location.latitude + ', ' + m.location.longitude + '</div>';
  if (m.contact) html += '<div class="file">contact: ' + esc(m.contact.first_name) + ' ' + esc(m.contact.phone_number) + '</div>';
  if (m.dice) html += '<div class="dice">' + esc(m.dice.emoji) + ' ' + m.dice.value + '</div>';
  if (m.text) html += '<div class="text">' + renderText(m.text, m.entities) + '</div>';
  if (m.caption) html += '<div class="text">' + renderText(m.caption, m.caption_entities) + '</div>';
  const t = new Date(m.date * 1000);
  html += '<div class="meta">' + (m.edit_date ? '<span class="edited">edited</span> ' : '') + t.toTimeString().slice(0, 5) + '</div>';
  div.innerHTML = html;
  const kb = renderKeyboard(m);
  if (kb) div.insertBefore(kb, div.querySelector('.meta'));
  div.querySelectorAll('.spoiler').forEach((s) => s.addEventListener('click', () => s.classList.add('shown')));
  div.querySelectorAll('.cmd[data-cmd]').forEach((c) => c.addEventListener('click', () => send(c.dataset.cmd)));
  return div;
}

function renderReplyKeyboard(kb) {
  const box = $('#reply-keyboard');
  box.innerHTML = '';
  box.hidden = !kb;
  if (!kb) return;
  for (const row of kb.keyboard) {
    const r = document.createElement('div');
    r.className = 'row';
    for (const b of row) {
      const text = typeof b === 'string' ? b : b.text;
      const el = document.createElement('button');
      el.type = 'button';
      el.textContent = text;
      el.addEventListener('click', () => send(text));
      r.appendChild(el);
    }
    box.appendChild(r);
  }
}

function chatQuery() {
  const c = S.current;
  return c.kind === 'bot' ? {chat_id: S.user, bot_id: c.bot_id} : {chat_id: c.id};
}

async function loadMessages() {
  if (!S.current) return;
  // Answers can arrive out of order, or after the user picked another chat: only the
  // newest answer for the chat on screen is drawn.
  const cur = S.current, q = chatQuery(), n = ++S.loads;
  const r = await api('messages', null, q);
  if (S.current !== cur || n < S.drawn) return;
  S.drawn = n;
  const key = JSON.stringify(q) + '@' + (r.ok ? r.version : 'none');
  if (key === S.shownVersion) return;
  S.shownVersion = key;
  const box = $('#messages');
  if (!r.ok) { box.innerHTML = ''; renderReplyKeyboard(null); return; }
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  // Edits replace the bubble in place; new messages are appended.
  const seen = new Set();
  for (const m of r.messages) {
    seen.add(String(m.message_id));
    const el = renderMessage(m);
    const old = box.querySelector('.msg[data-id="' + m.message_id + '"]');
    if (old) { if (old.innerHTML !== el.innerHTML) old.replaceWith(el); } else box.appendChild(el);
  }
  box.querySelectorAll('.msg').forEach((el) => { if (!seen.has(el.dataset.id)) el.remove(); });
  renderReplyKeyboard(r.reply_keyboard);
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function selectChat(c) {
  S.current = c;
  S.shownVersion = null;
  $('#messages').innerHTML = '';
  $('#chat-title').textContent = c.title;
  $('#block').hidden = c.kind !== 'bot';
  $('#block').textContent = 'Block bot';
  for (const el of ['#composer', '#send', '#inline-query', '#inline-send']) $(el).disabled = false;
  $('#inline-query').disabled = $('#inline-send').disabled = c.kind !== 'bot';
  renderChats();
  loadMessages();
  $('#composer').focus();
}

function renderChats() {
  const nav = $('#chats');
  nav.innerHTML = '';
  const items = [];
  for (const b of S.bots) {
    items.push({kind: 'bot', id: 'bot' + b.user.id, bot_id: b.user.id, title: b.user.first_name,
      sub: '@' + b.user.username + (b.webhook_url ? ' (webhook)' : '') + ' · ' + b.pending_updates + ' pending',
      username: b.user.username});
  }
  for (const c of S.chats) {
    if (c.chat.type === 'private' || c.migrate_to_chat_id) continue;
    items.push({kind: 'group', id: c.chat.id, title: c.chat.title, sub: c.chat.type});
  }
  for (const it of items) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chat-item' + (S.current && S.current.id === it.id ? ' active' : '');
    if (it.username) b.dataset.bot = it.username;
    b.innerHTML = esc(it.title) + '<small>' + esc(it.sub) + '</small>';
    b.addEventListener('click', () => selectChat(it));
    nav.appendChild(b);
  }
}

function renderUsers() {
  const sel = $('#user');
  const keep = S.user;
  sel.innerHTML = '';
  for (const u of S.users) {
    const o = document.createElement('option');
    o.value = u.id;
    o.textContent = name(u) + ' (' + u.id + ')';
    sel.appendChild(o);
  }
  S.user = keep || (S.users[0] && S.users[0].id);
  sel.value = S.user;
}

async function loadState() {
  const r = await api('state');
  if (!r.ok) return;
  S.users = r.users; S.bots = r.bots; S.chats = r.chats;
  renderUsers();
  renderChats();
}

function appendEvent(ev) {
  const li = document.createElement('li');
  const call = ev.kind === 'call';
  const failed = call && ev.data.response && ev.data.response.ok === false;
  li.className = ev.kind + (failed ? ' error' : '');
  const label = call ? ev.data.method : Object.keys(ev.data).find((k) => k !== 'update_id');
  li.innerHTML = '<span class="tag">' + (call ? 'call' : 'update') + '</span>' + esc(label || '') +
    ' <small>bot ' + ev.bot_id + '</small><pre></pre>';
  li.querySelector('pre').textContent = JSON.stringify(ev.data, null, 1);
  li.hidden = !(call ? $('#panel-calls').checked : $('#panel-updates').checked);
  const list = $('#events');
  list.insertBefore(li, list.firstChild);
  while (list.children.length > 300) list.lastChild.remove();
}

async function pump() {
  for (;;) {
    try {
      const r = await api('events', null, {since: S.seq, version: S.version, timeout_ms: 20000});
      if (r.ok) {
        for (const ev of r.events) appendEvent(ev);
        S.seq = r.seq;
        if (r.version !== S.version) {
          S.version = r.version;
          await loadState();
          await loadMessages();
        }
      }
    } catch (e) {
      await new Promise((res) => setTimeout(res, 1000)); // emulator restarting
    }
  }
}

async function send(text) {
  if (!S.current || !text) return;
  const r = await api('send', Object.assign({user_id: Number(S.user), text}, chatQuery()));
  if (!r.ok) toast(r.error);
  else await loadMessages();
}

async function press(m, data) {
  const r = await api('press', Object.assign({user_id: Number(S.user), message_id: m.message_id,
    data, wait_ms: 5000}, chatQuery()));
  if (!r.ok) { toast(r.error); return; }
  if (r.answer) toast(r.answer.text, r.answer.show_alert);
}

$('#composer-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = $('#composer');
  const text = input.value;
  input.value = '';
  send(text);
});

$('#file').addEventListener('change', async (e) => {
  const f = e.target.files[0];
  if (!f || !S.current) return;
  const buf = new Uint8Array(await f.arrayBuffer());
  let bin = '';
  for (let i = 0; i < buf.length; i += 0x8000) bin += String.fromCharCode.apply(null, buf.subarray(i, i + 0x8000));
  const photo = /^image\//.test(f.type);
  const r = await api(photo ? 'photo' : 'document', Object.assign({user_id: Number(S.user),
    file_name: f.name, mime_type: f.type || undefined, data_base64: btoa(bin)}, chatQuery()));
  if (!r.ok) toast(r.error);
  e.target.value = '';
});

$('#inline-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  if (!S.current || S.current.kind !== 'bot') return;
  const box = $('#inline-results');
  box.textContent = 'waiting for the bot...';
  const r = await api('inline', {user_id: Number(S.user), bot_id: S.current.bot_id,
    query: $('#inline-query').value, wait_ms: 5000});
  box.innerHTML = '';
  if (!r.ok || !r.answer) { box.textContent = r.ok ? 'the bot did not answer' : r.error; return; }
  for (const res of r.answer) {
    const d = document.createElement('div');
    d.className = 'inline-result';
    const content = res.input_message_content && res.input_message_content.message_text;
    d.textContent = (res.title || res.id) + (content ? ' — ' + content : '');
    if (content) {
      d.addEventListener('click', async () => {
        box.innerHTML = '';
        const c = await api('choose', Object.assign({user_id: Number(S.user), query_id: r.query_id,
          result_id: res.id}, chatQuery()));
        if (!c.ok) toast(c.error);
        else await loadMessages();
      });
    }
    box.appendChild(d);
  }
});

$('#block').addEventListener('click', async () => {
  if (!S.current || S.current.kind !== 'bot') return;
  const blocking = $('#block').textContent === 'Block bot';
  const r = await api('block', {user_id: Number(S.user), bot_id: S.current.bot_id, blocked: blocking});
  if (!r.ok) { toast(r.error); return; }
  $('#block').textContent = blocking ? 'Unblock bot' : 'Block bot';
  toast(blocking ? 'You blocked the bot: its messages now fail with 403' : 'Bot unblocked');
});

$('#user').addEventListener('change', (e) => { S.user = Number(e.target.value); S.shownVersion = null; loadMessages(); });

$('#add-user').addEventListener('click', async () => {
  const first = window.prompt('First name of the new user?', 'Alice');
  if (!first) return;
  const r = await api('users', {first_name: first});
  if (r.ok) { S.user = r.user.id; await loadState(); }
});

$('#add-group').addEventListener('click', async () => {
  const bot = S.current && S.current.bot_id ? S.current.bot_id : S.bots[0] && S.bots[0].user.id;
  if (!bot) { toast('Start a bot first'); return; }
  const title = window.prompt('Group title?', 'Test group');
  if (!title) return;
  const r = await api('chats', {type: 'supergroup', title, owner_id: Number(S.user)});
  if (!r.ok) { toast(r.error); return; }
  await api('join', {chat_id: r.chat.id, user_id: bot, admin: true});
  await loadState();
});

for (const id of ['#panel-calls', '#panel-updates']) {
  $(id).addEventListener('change', () => {
    document.querySelectorAll('#events li').forEach((li) => {
      li.hidden = !(li.classList.contains('call') ? $('#panel-calls').checked : $('#panel-updates').checked);
    });
  });
}

loadState().then(pump);

// Show script errors instead of failing silently (and so tests can report them).
window.addEventListener('error', (e) => toast('web chat error: ' + e.message));
window.addEventListener('unhandledrejection', (e) => toast('web chat error: ' + (e.reason && e.reason.message || e.reason)));
