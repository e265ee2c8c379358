// The page of `harness bot --emulator`: renders what /ui/state says (long-polled), and sends
// what the person does to the /ui/... routes. Everything from the bot or its agents is
// untrusted: it is escaped, links open only http(s), and no image from a message is loaded.
"use strict";

const ui = {
  state: null,
  view: "DUYOU", // a channel id, or "home"
  thread: null, // the open thread's root ts
  clicked: new Set(), // buttons this person pressed (Slack shows the feedback buttons pressed)
};
const $ = (id) => document.getElementById(id);
const EMOJI = {
  white_check_mark: "✅", x: "❌", eyes: "👀", hourglass_flowing_sand: "⏳", hourglass: "⌛",
  warning: "⚠️", octagonal_sign: "🛑", repeat: "🔁", hammer_and_wrench: "🛠️", thumbsup: "👍",
  "+1": "👍", thinking_face: "🤔", rocket: "🚀", memo: "📝", white_circle: "⚪", bulb: "💡",
};

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function name(user) {
  return (ui.state && ui.state.names[user]) || user;
}

function token(inner) {
  // Slack's <...> tokens: a mention, a channel, a special mention or a link.
  const [target, label] = inner.split("|", 2);
  if (target.startsWith("@")) return `<b class="mention">@${esc(label || name(target.slice(1)))}</b>`;
  if (target.startsWith("#")) return `<b>#${esc(label || target.slice(1))}</b>`;
  if (target.startsWith("!")) return `<b>@${esc(label || target.slice(1).split("^")[0])}</b>`;
  if (/^(https?:|mailto:)/i.test(target)) {
    return `<a href="${esc(target)}" target="_blank" rel="noopener noreferrer">${esc(label || target)}</a>`;
  }
  return esc(label || target);
}

function unslack(text) {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function inline(html) {
  // Formatting on already escaped text: bold, italic, strike (Slack's and Markdown's bold).
  return html
    .replace(/\*\*([^*\n]+)\*\*/g, "<b>$1</b>")
    .replace(/(^|[\s(>])\*([^*\n]+)\*(?=$|[\s).,:;!?<])/g, "$1<b>$2</b>")
    .replace(/(^|[\s(>])_([^_\n]+)_(?=$|[\s).,:;!?<])/g, "$1<i>$2</i>")
    .replace(/(^|[\s(>])~([^~\n]+)~(?=$|[\s).,:;!?<])/g, "$1<s>$2</s>")
    .replace(/:([a-z0-9_+-]+):/g, (m, e) => EMOJI[e] || m);
}

function mrkdwn(text) {
  // Code first (nothing inside it is formatted), then tokens, then formatting, line by line.
  const parts = String(text || "").split(/(```[\s\S]*?```|`[^`\n]+`)/);
  return parts.map((part, i) => {
    if (i % 2 === 1) {
      return part.startsWith("```")
        ? `<pre><code>${esc(unslack(part.slice(3, -3).replace(/^\n/, "")))}</code></pre>`
        : `<code>${esc(unslack(part.slice(1, -1)))}</code>`;
    }
    const pieces = part.split(/<([^<>\n]*)>/);
    const html = pieces.map((p, j) => (j % 2 ? token(p) : esc(unslack(p)))).join("");
    return html.split("\n").map((line) => {
      const quote = line.match(/^&gt; ?(.*)$/);
      return quote ? `<blockquote>${inline(quote[1])}</blockquote>` : inline(line);
    }).join("<br>").replace(/<\/blockquote><br>/g, "</blockquote>");
  }).join("");
}

function textObject(obj) {
  if (!obj || typeof obj !== "object") return "";
  return obj.type === "plain_text" ? esc(obj.text || "").replace(/\n/g, "<br>") : mrkdwn(obj.text);
}

function button(el, where) {
  const label = esc((el.text && el.text.text) || "button");
  const style = el.style === "primary" || el.style === "danger" ? ` ${el.style}` : "";
  const key = `${where.ts || "home"} ${el.action_id} ${el.value || ""}`;
  const pressed = ui.clicked.has(key) ? " clicked" : "";
  if (el.url && /^https?:/i.test(el.url)) {
    return `<a class="action button${style}" href="${esc(el.url)}" target="_blank" rel="noopener noreferrer">${label}</a>`;
  }
  const confirm = el.confirm ? ` data-confirm="${esc(JSON.stringify(el.confirm))}"` : "";
  return `<button class="action${style}${pressed}" data-action-id="${esc(el.action_id || "")}" ` +
    `data-value="${esc(el.value || "")}" data-channel="${esc(where.channel || "")}" ` +
    `data-ts="${esc(where.ts || "")}" data-view="${esc(where.view || "")}"${confirm}>${label}</button>`;
}

function element(el, where) {
  if (!el || typeof el !== "object") return "";
  if (el.type === "button") return button(el, where);
  if (el.type === "feedback_buttons") {
    return [el.positive_button, el.negative_button].filter(Boolean)
      .map((b) => button({ ...b, action_id: el.action_id }, where)).join("");
  }
  if (el.type === "icon_button") return button({ ...el, text: { text: el.text ? el.text.text : el.icon } }, where);
  if (el.type === "mrkdwn" || el.type === "plain_text") return `<span class="text">${textObject(el)}</span>`;
  if (el.type === "image") return `<span>[${esc(el.alt_text || "image")}]</span>`;
  return `<span class="unsupported">(${esc(el.type || "element")}: not shown here)</span>`;
}

function richText(block) {
  const walk = (els) => (els || []).map((e) => {
    if (e.type === "text") return esc(e.text || "");
    if (e.type === "link") return token(`${e.url}|${e.text || e.url}`);
    if (e.type === "user") return token(`@${e.user_id}`);
    if (e.type === "emoji") return EMOJI[e.name] || `:${esc(e.name)}:`;
    if (e.elements) return `<div>${walk(e.elements)}</div>`;
    return "";
  }).join("");
  return walk(block.elements).replace(/\n/g, "<br>");
}

function blocks(list, where) {
  return list.map((b) => {
    if (!b || typeof b !== "object") return "";
    switch (b.type) {
      case "section": {
        const fields = b.fields ? `<div class="fields">${b.fields.map((f) => `<div class="text">${textObject(f)}</div>`).join("")}</div>` : "";
        const accessory = b.accessory ? element(b.accessory, where) : "";
        return `<div class="block section"><div class="text">${textObject(b.text)}${fields}</div>${accessory}</div>`;
      }
      case "header": return `<div class="block header">${textObject(b.text)}</div>`;
      case "divider": return "<hr>";
      case "context": return `<div class="block context">${(b.elements || []).map((e) => element(e, where)).join("")}</div>`;
      case "actions":
      case "context_actions": return `<div class="block actions">${(b.elements || []).map((e) => element(e, where)).join("")}</div>`;
      case "markdown": return `<div class="block text">${mrkdwn(b.text)}</div>`;
      case "rich_text": return `<div class="block text">${richText(b)}</div>`;
      case "image": return `<div class="block">[${esc(b.alt_text || "image")}]</div>`;
      default: return `<div class="block unsupported">(a ${esc(b.type)} block: not shown here)</div>`;
    }
  }).join("");
}

function when(ts) {
  const d = new Date(parseFloat(ts) * 1000);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function message(m, channel, opts) {
  const bot = !!m.bot_id;
  const who = bot ? ui.state.bot_name : name(m.user);
  const where = { channel, ts: m.ts };
  const hasBlocks = Array.isArray(m.blocks) && m.blocks.length;
  // A streamed reply shows what was streamed, its task lines, then the blocks it ended with.
  const streamed = "tasks" in m;
  let content = hasBlocks && !streamed ? "" : `<div class="text">${mrkdwn(m.text)}</div>`;
  if (m.tasks && m.tasks.length) {
    const mark = { pending: "⏳", in_progress: "⏳", complete: "✅", error: "❌" };
    content += `<div class="tasks">${m.plan ? `<b>${esc(m.plan)}</b><br>` : ""}` +
      m.tasks.map((t) => `<div>${mark[t.status] || "•"} ${esc(t.title)} <span class="muted">${esc(t.status)}</span></div>`).join("") + "</div>";
  }
  if (m.streaming) content += `<div class="streaming">writing…</div>`;
  if (hasBlocks) content += blocks(m.blocks, where);
  if (m.files) content += m.files.map((f) => `<div class="muted">📎 ${esc(f.name || f.title || "file")}</div>`).join("");
  const reactions = (m.reactions || []).map((r) => `<span class="reaction" title=":${esc(r.name)}:">${EMOJI[r.name] || ":" + esc(r.name) + ":"} ${r.count}</span>`).join("");
  const replies = opts.replies && m.reply_count ? `<button class="replies" data-thread="${esc(m.ts)}">${m.reply_count} ${m.reply_count === 1 ? "reply" : "replies"}</button>` : "";
  const only = opts.ephemeral ? `<div class="only-you">Only visible to you</div>` : "";
  return `<div class="msg${opts.ephemeral ? " ephemeral" : ""}${bot ? " from-bot" : ""}" data-ts="${esc(m.ts)}">` +
    `<div class="avatar${bot ? " bot" : ""}">${esc(who.slice(0, 1).toUpperCase())}</div><div class="body">` +
    `<div><span class="who">${esc(who)}</span>${bot ? '<span class="badge">APP</span>' : ""}<span class="when">${when(m.ts)}</span></div>` +
    `${only}${content}${reactions ? `<div class="reactions">${reactions}</div>` : ""}${replies}</div></div>`;
}

function byTs(a, b) {
  return parseFloat(a.ts) - parseFloat(b.ts);
}

function keepScroll(el, html) {
  const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  if (el.dataset.html === html) return;
  el.innerHTML = html;
  el.dataset.html = html;
  if (atEnd) el.scrollTop = el.scrollHeight;
}

function render() {
  const s = ui.state;
  if (!s) return;
  const nav = (c) => `<button class="nav-item${ui.view === c.id ? " active" : ""}" data-view="${esc(c.id)}">${c.kind === "im" ? "💬 " : "# "}${esc(c.name)}</button>`;
  $("nav-channels").innerHTML = s.channels.filter((c) => c.kind !== "im").map(nav).join("");
  $("nav-dms").innerHTML = s.channels.filter((c) => c.kind === "im").map(nav).join("");
  $("nav-home").classList.toggle("active", ui.view === "home");
  const home = ui.view === "home";
  $("messages").hidden = home;
  $("composer").hidden = home;
  $("home").hidden = !home;
  if (home) {
    $("main-header").textContent = `${s.bot_name} · Home`;
    const view = s.home;
    keepScroll($("home"), view ? blocks(view.blocks || [], { view: "home" }) : `<div class="empty">Opening the Home tab…</div>`);
  } else {
    const channel = s.channels.find((c) => c.id === ui.view) || s.channels[0];
    ui.view = channel.id;
    $("main-header").textContent = channel.kind === "im" ? channel.name : `# ${channel.name}`;
    $("composer-text").placeholder = channel.kind === "im" ? `Message ${channel.name}` : `Message #${channel.name} (mention @${s.bot_name})`;
    const top = (s.messages[channel.id] || []).filter((m) => !m.thread_ts || m.thread_ts === m.ts);
    const eph = s.ephemeral.filter((e) => e.channel === channel.id && !e.thread_ts);
    const items = [...top.map((m) => [m, false]), ...eph.map((m) => [m, true])].sort((a, b) => byTs(a[0], b[0]));
    const html = items.map(([m, e]) => message(m, channel.id, { replies: !e, ephemeral: e })).join("");
    keepScroll($("messages"), html || `<div class="empty">Nothing here yet. Write a message below.</div>`);
  }
  renderThread();
}

function renderThread() {
  const s = ui.state;
  const open = ui.thread && ui.view !== "home";
  $("thread").hidden = !open;
  if (!open) return;
  const all = s.messages[ui.view] || [];
  const thread = all.filter((m) => m.ts === ui.thread || m.thread_ts === ui.thread);
  const eph = s.ephemeral.filter((e) => e.channel === ui.view && e.thread_ts === ui.thread);
  const items = [...thread.map((m) => [m, false]), ...eph.map((m) => [m, true])].sort((a, b) => byTs(a[0], b[0]));
  keepScroll($("thread-messages"), items.map(([m, e]) => message(m, ui.view, { ephemeral: e })).join(""));
  const key = `${ui.view} ${ui.thread}`;
  const status = s.statuses[key];
  $("thread-status").textContent = status ? `${s.bot_name} ${status}` : "";
  $("thread-stop").hidden = s.sessions[key] !== "processing";
}

function toast(text) {
  const el = $("toast");
  el.textContent = text;
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 5000);
}

async function post(route, body) {
  const answer = await fetch(`/ui/${route}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await answer.json().catch(() => ({}));
  if (!answer.ok) toast(data.error || `failed: HTTP ${answer.status}`);
  else if (data.delivered === false) toast("the bot did not take it (see its terminal)");
  return answer.ok ? data : null;
}

async function send(text, threadTs) {
  if (!text.trim()) return;
  if (text.trim().startsWith("/")) {
    await post("command", { channel: ui.view, text: text.trim() });
    return;
  }
  const sent = await post("message", { channel: ui.view, text, thread_ts: threadTs || null });
  if (sent && !threadTs) ui.thread = sent.ts; // its answer comes in its thread
  render();
}

async function poll() {
  let since = -1;
  for (;;) {
    try {
      const answer = await fetch(`/ui/state?since=${since}`, { cache: "no-store" });
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
      ui.state = await answer.json();
      since = ui.state.version;
      document.body.dataset.version = String(since);
      render();
    } catch (err) {
      document.body.dataset.offline = "1";
      await new Promise((resolve) => setTimeout(resolve, 1500)); // the emulator stopped or restarts
    }
  }
}

function submitOnEnter(textarea, form) {
  textarea.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
}

document.addEventListener("click", async (e) => {
  const target = e.target.closest("button");
  if (!target) return;
  if (target.dataset.thread) { ui.thread = target.dataset.thread; render(); return; }
  if (target.classList.contains("nav-item")) {
    ui.view = target.dataset.view;
    ui.thread = null;
    render();
    if (ui.view === "home") await post("home", {});
    return;
  }
  if (target.dataset.actionId !== undefined) {
    if (target.dataset.confirm) {
      const c = JSON.parse(target.dataset.confirm);
      const question = [c.title && c.title.text, c.text && c.text.text].filter(Boolean).join("\n\n");
      if (!window.confirm(question || "Are you sure?")) return;
    }
    const d = target.dataset;
    const body = { action_id: d.actionId, value: d.value };
    if (d.view === "home") body.view = "home";
    else Object.assign(body, { channel: d.channel, ts: d.ts });
    target.disabled = true;
    const done = await post("action", body);
    target.disabled = false;
    if (done) { ui.clicked.add(`${d.ts || "home"} ${d.actionId} ${d.value}`); target.classList.add("clicked"); }
  }
});

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("composer-text").value;
  $("composer-text").value = "";
  await send(text, null);
});
$("reply").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("reply-text").value;
  $("reply-text").value = "";
  await send(text, ui.thread);
});
$("thread-close").addEventListener("click", () => { ui.thread = null; render(); });
$("thread-stop").addEventListener("click", () => post("stop", { channel: ui.view, thread_ts: ui.thread }));
submitOnEnter($("composer-text"), $("composer"));
submitOnEnter($("reply-text"), $("reply"));
poll();
