// streamsql's web console: plain JavaScript over the server's REST API, no library.
//
// Rule kept throughout: text that comes from the server (records, names, errors, statements) is
// only ever set with textContent or as an attribute value, never parsed as HTML. The page's
// Content-Security-Policy allows this script and nothing inline.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  /** Rows a push query keeps on the page; older ones leave as new ones arrive. */
  const MAX_PUSH_ROWS = 1000;
  const DELIMITED = "application/vnd.ksqlapi.delimited.v1";
  const ROLES = ["reader", "developer", "admin"];

  let me = { user: "", role: "admin", authentication: false };
  let vocab = { sources: {}, columns: {}, queries: [], functions: [], properties: [], topics: [], variables: [],
                keywords: [], types: [], showTargets: [] };
  let keywordSet = new Set();
  let typeSet = new Set();
  const tabs = [];
  let activeTab = 0;
  /** The push or pull query now streaming into the results, if any. */
  let current = null;

  // --- elements -------------------------------------------------------------------------------

  /** An element with text children (strings become text nodes, never HTML). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "className") node.className = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "disabled" || key === "hidden") node[key] = Boolean(value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function text(value) {
    if (value === null || value === undefined) return "null";
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  function table(columns, rows) {
    const head = el("tr", {}, ...columns.map((c) => el("th", {}, c)));
    const body = el("tbody");
    for (const row of rows) body.append(el("tr", {}, ...row.map((v) => el("td", {}, text(v)))));
    return el("table", {}, el("thead", {}, head), body);
  }

  // --- the API --------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      const message = body && typeof body === "object" && body.message ? body.message
        : (typeof body === "string" && body ? body : `HTTP ${status}`);
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  async function api(method, path, body) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    const raw = await resp.text();
    let data = raw;
    try { data = raw ? JSON.parse(raw) : null; } catch (e) { /* not JSON: keep the text */ }
    if (resp.status === 401 && path !== "/console/login") showLogin();
    if (!resp.ok) throw new ApiError(resp.status, data);
    return data;
  }

  function tab() { return tabs[activeTab]; }

  function ksql(statement, t) {
    const session = t || tab();
    return api("POST", "/ksql", { ksql: statement, streamsProperties: session.properties,
                                  sessionVariables: session.variables });
  }

  // --- login ----------------------------------------------------------------------------------

  function showLogin() {
    stopCurrent();
    $("app").hidden = true;
    $("logout").hidden = true;
    $("whoami").textContent = "";
    $("login").hidden = false;
    $("login-user").focus();
  }

  async function showApp(session) {
    me = session;
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = !me.authentication;
    $("whoami").textContent = me.authentication ? `${me.user} (${me.role})` : "no authentication";
    document.body.dataset.role = me.role;
    await refreshVocabulary();
    showPane(currentPane || "streams");
    $("editor").focus();
  }

  async function start() {
    try {
      await showApp(await api("GET", "/console/session"));
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) $("login-error").textContent = e.message;
      showLogin();
    }
  }

  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("login-error").textContent = "";
    try {
      const session = await api("POST", "/console/login", { user: $("login-user").value,
                                                            password: $("login-password").value });
      $("login-password").value = "";
      await showApp(session);
    } catch (e) {
      $("login-error").textContent = e.message;
    }
  });

  $("logout").addEventListener("click", async () => {
    stopCurrent();
    try { await api("POST", "/console/logout", {}); } finally { showLogin(); }
  });

  // --- tabs and their sessions ----------------------------------------------------------------

  function newTab(textValue) {
    tabs.push({ name: `Tab ${tabs.length + 1}`, text: textValue || "", properties: {}, variables: {}, error: null });
    switchTab(tabs.length - 1);
  }

  function switchTab(index) {
    if (tabs[activeTab]) tabs[activeTab].text = $("editor").value;
    activeTab = index;
    $("editor").value = tab().text;
    renderTabs();
    renderHighlight();
    renderSession();
  }

  function renderTabs() {
    const list = $("tab-list");
    list.replaceChildren(...tabs.map((t, i) => el("span", { className: "tab" + (i === activeTab ? " active" : ""),
                                                           onclick: () => switchTab(i) }, t.name)));
  }

  function renderSession() {
    const t = tab();
    const parts = Object.entries(t.properties).map(([k, v]) => `${k}=${v}`)
      .concat(Object.entries(t.variables).map(([k, v]) => `\${${k}}=${v}`));
    $("session-props").textContent = parts.length ? "session: " + parts.join(", ") : "";
  }

  $("tab-new").addEventListener("click", () => newTab(""));

  // --- highlighting ---------------------------------------------------------------------------

  const TOKEN = /(\s+)|(--[^\n]*)|(\/\*[\s\S]*?(?:\*\/|$))|('(?:''|[^'])*'?)|(`(?:``|[^`])*`?)|("(?:""|[^"])*"?)|(\$\{[A-Za-z_][A-Za-z0-9_]*\})|(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|([\s\S])/g;

  /** The statement text's tokens: [class, start, end]. */
  function tokenize(source) {
    const out = [];
    TOKEN.lastIndex = 0;
    let m;
    while ((m = TOKEN.exec(source)) !== null) {
      let cls = "";
      if (m[2] || m[3]) cls = "tok-com";
      else if (m[4]) cls = "tok-str";
      else if (m[7]) cls = "tok-var";
      else if (m[8]) cls = "tok-num";
      else if (m[9]) {
        const word = m[9].toUpperCase();
        if (keywordSet.has(word)) cls = "tok-kw";
        else if (typeSet.has(word)) cls = "tok-type";
        else if (/^\s*\(/.test(source.slice(TOKEN.lastIndex))) cls = "tok-fn";
      }
      out.push([cls, m.index, TOKEN.lastIndex, m[1] !== undefined, m[2] !== undefined || m[3] !== undefined]);
    }
    return out;
  }

  function renderHighlight() {
    const source = $("editor").value;
    const error = tab() && tab().error;
    const box = $("highlight");
    const parts = [];
    for (const [cls, start, end] of tokenize(source)) {
      const pieces = error && start < error.end && end > error.start
        ? [[start, Math.max(start, error.start), cls], [Math.max(start, error.start), Math.min(end, error.end), cls + " tok-err"],
           [Math.min(end, error.end), end, cls]]
        : [[start, end, cls]];
      for (const [a, b, c] of pieces) {
        if (a >= b) continue;
        const piece = source.slice(a, b);
        if (!c) { parts.push(document.createTextNode(piece)); continue; }
        const span = el("span", { className: c.trim() }, piece);
        if (c.includes("tok-err")) {
          span.id = "error-mark";
          span.dataset.line = error.line;
          span.dataset.column = error.column;
          span.title = error.message;
        }
        parts.push(span);
      }
    }
    parts.push(document.createTextNode("\n "));
    box.replaceChildren(...parts);
    box.scrollTop = $("editor").scrollTop;
  }

  $("editor").addEventListener("input", () => {
    if (tab().error) tab().error = null;
    tab().text = $("editor").value;
    renderHighlight();
    if (!$("completions").hidden) openCompletions();
  });
  $("editor").addEventListener("scroll", () => { $("highlight").scrollTop = $("editor").scrollTop; });

  // --- completion (the words come from GET /vocabulary, as the remote shell's do) --------------

  async function refreshVocabulary() {
    try {
      vocab = await api("GET", "/vocabulary");
      keywordSet = new Set(vocab.keywords);
      typeSet = new Set(vocab.types);
      renderHighlight();
    } catch (e) { /* completion is best effort */ }
  }

  /** What may follow the words before the cursor (the shell's rules, surfaces/shell_syntax.py). */
  function candidates(statement, typed) {
    const variables = Object.keys(tab().variables);
    if (typed.startsWith("${")) return variables.map((v) => `\${${v}}`);
    const previous = (statement.match(/[A-Za-z_][A-Za-z0-9_]*/g) || []).map((w) => w.toUpperCase());
    const last = previous.length ? previous[previous.length - 1] : "";
    const quotedProperties = vocab.properties.concat(Object.keys(tab().properties)).map((p) => `'${p}'`);
    if (typed.startsWith("'")) return ["SET", "UNSET"].includes(last) ? quotedProperties : [];
    if (!previous.length) return vocab.keywords;
    if (last === "SHOW" || last === "LIST") return vocab.showTargets;
    if (last === "FUNCTION") return vocab.functions;
    if (["TERMINATE", "EXPLAIN", "PAUSE", "RESUME"].includes(last)) return vocab.queries.concat(last !== "EXPLAIN" ? ["ALL"] : []);
    if (last === "PRINT") return vocab.topics.concat(Object.keys(vocab.sources));
    if (last === "SET" || last === "UNSET") return quotedProperties;
    if ((["STREAM", "TABLE", "TYPE"].includes(last) && previous[0] === "CREATE") || (last === "AS" && previous.length <= 4)) return [];
    if (["FROM", "JOIN", "INTO", "DESCRIBE", "EXTENDED", "STREAM", "TABLE"].includes(last)) return Object.keys(vocab.sources).sort();
    const named = Object.keys(vocab.sources).filter((n) => previous.includes(n.toUpperCase()));
    const columns = new Set();
    for (const name of (named.length ? named : Object.keys(vocab.sources))) for (const c of vocab.columns[name] || []) columns.add(c);
    return [...columns].sort().concat(Object.keys(vocab.sources).sort(), vocab.functions, vocab.keywords, vocab.types);
  }

  let completion = { items: [], selected: 0, typedLength: 0 };

  function openCompletions() {
    const editor = $("editor");
    const before = editor.value.slice(0, editor.selectionStart);
    const m = before.match(/(\$\{[A-Za-z0-9_]*)$/) || before.match(/('[^'\s]*|[A-Za-z_][A-Za-z0-9_]*)$/);
    const typed = m ? m[1] : "";
    const statement = before.slice(0, before.length - typed.length).split(";").pop();
    const lower = typed && typed === typed.toLowerCase() && typed.toUpperCase() !== typed;
    const seen = new Set();
    const items = [];
    for (const c of candidates(statement, typed)) {
      if (!c.toUpperCase().startsWith(typed.toUpperCase()) || c.toUpperCase() === typed.toUpperCase()) continue;
      const shown = lower && !typed.startsWith("'") && !typed.startsWith("$") ? c.toLowerCase() : c;
      if (!seen.has(shown)) { seen.add(shown); items.push(shown); }
      if (items.length >= 200) break;
    }
    completion = { items, selected: 0, typedLength: typed.length };
    const list = $("completions");
    if (!items.length) { list.hidden = true; return; }
    list.replaceChildren(...items.map((item, i) => el("li", { className: i === 0 ? "selected" : "",
                                                             onclick: () => acceptCompletion(i) }, item)));
    const lines = before.split("\n");
    const lineHeight = 19.5;
    list.style.top = `${Math.min(lines.length * lineHeight + 8 - editor.scrollTop, 170)}px`;
    list.style.left = `${Math.min(lines[lines.length - 1].length * 7.8 + 8, editor.clientWidth - 200)}px`;
    list.hidden = false;
  }

  function acceptCompletion(index) {
    const editor = $("editor");
    const item = completion.items[index];
    if (item === undefined) return;
    const end = editor.selectionStart;
    const start = end - completion.typedLength;
    editor.setRangeText(item, start, end, "end");
    $("completions").hidden = true;
    tab().text = editor.value;
    renderHighlight();
    editor.focus();
  }

  function moveCompletion(step) {
    const items = $("completions").children;
    if (!items.length) return;
    items[completion.selected].className = "";
    completion.selected = (completion.selected + step + items.length) % items.length;
    items[completion.selected].className = "selected";
    items[completion.selected].scrollIntoView({ block: "nearest" });
  }

  $("editor").addEventListener("keydown", (event) => {
    const open = !$("completions").hidden;
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      event.preventDefault();
      $("completions").hidden = true;
      runEditor();
    } else if (event.ctrlKey && (event.key === " " || event.code === "Space")) {
      event.preventDefault();
      openCompletions();
    } else if (open && event.key === "ArrowDown") { event.preventDefault(); moveCompletion(1); }
    else if (open && event.key === "ArrowUp") { event.preventDefault(); moveCompletion(-1); }
    else if (open && (event.key === "Enter" || event.key === "Tab")) { event.preventDefault(); acceptCompletion(completion.selected); }
    else if (open && event.key === "Escape") { event.preventDefault(); $("completions").hidden = true; }
  });
  $("editor").addEventListener("blur", () => setTimeout(() => { $("completions").hidden = true; }, 200));

  // --- running statements ---------------------------------------------------------------------

  /** The statements of ``source`` with where each starts (quotes and comments respected). */
  function splitStatements(source) {
    const out = [];
    let start = null;
    let meaningful = false;
    const tokens = tokenize(source);
    for (const [, a, b, space, comment] of tokens) {
      const piece = source.slice(a, b);
      if (start === null) {
        if (space || comment) continue;
        start = a;
      }
      if (!space && !comment && piece !== ";") meaningful = true;
      if (piece === ";") {
        if (meaningful) out.push({ text: source.slice(start, b), start });
        start = null;
        meaningful = false;
      }
    }
    if (start !== null && meaningful) out.push({ text: source.slice(start).trimEnd(), start });
    return out;
  }

  function firstWord(statement) {
    for (const [, a, b, space, comment] of tokenize(statement)) {
      if (!space && !comment) return statement.slice(a, b).toUpperCase();
    }
    return "";
  }

  const SET = /^SET\s+'((?:''|[^'])*)'\s*=\s*'((?:''|[^'])*)'\s*;?\s*$/i;
  const UNSET = /^UNSET\s+'((?:''|[^'])*)'\s*;?\s*$/i;
  const DEFINE = /^DEFINE\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*'((?:''|[^'])*)'\s*;?\s*$/i;
  const UNDEFINE = /^UNDEFINE\s+([A-Za-z_][A-Za-z0-9_]*)\s*;?\s*$/i;

  /** SET/UNSET/DEFINE/UNDEFINE change the tab's session, which every request carries (as the
   *  REST API's streamsProperties and sessionVariables), as ksqlDB's CLI keeps them. */
  async function sessionStatement(statement) {
    const t = tab();
    let m;
    if ((m = statement.match(SET))) {
      const name = m[1].replace(/''/g, "'");
      await api("GET", "/is_valid_property/" + encodeURIComponent(name));
      t.properties[name] = m[2].replace(/''/g, "'");
      return `Successfully changed local property '${name}' to '${t.properties[name]}'.`;
    }
    if ((m = statement.match(UNSET))) {
      const name = m[1].replace(/''/g, "'");
      const had = name in t.properties;
      delete t.properties[name];
      return had ? `Successfully unset local property '${name}'.` : `Property '${name}' was not set locally`;
    }
    if ((m = statement.match(DEFINE))) {
      t.variables[m[1]] = m[2].replace(/''/g, "'");
      return `Defined variable ${m[1]}`;
    }
    if ((m = statement.match(UNDEFINE))) {
      const had = m[1] in t.variables;
      delete t.variables[m[1]];
      return had ? `Undefined variable ${m[1]}` : `Cannot undefine variable '${m[1]}' which was never defined`;
    }
    return null;
  }

  function setStatus(message) { $("status").textContent = message; }

  async function runEditor() {
    if (current) return;
    const t = tab();
    t.text = $("editor").value;
    t.error = null;
    renderHighlight();
    const statements = splitStatements(t.text);
    $("results").replaceChildren();
    $("run").disabled = true;
    let failed = false;
    try {
      for (const stmt of statements) {
        const block = el("div", { className: "result" }, el("h3", {}, stmt.text.length > 200 ? stmt.text.slice(0, 200) + "…" : stmt.text));
        $("results").append(block);
        setStatus("running…");
        try {
          const local = await sessionStatement(stmt.text);
          if (local !== null) {
            block.append(el("div", { className: "message" }, local));
            renderSession();
            continue;
          }
          const word = firstWord(stmt.text);
          if (word === "SELECT" || word === "PRINT") await runQuery(stmt, block);
          else renderEntities(await ksql(stmt.text), block);
        } catch (e) {
          showError(e, stmt, block);
          failed = true;
          break;
        }
      }
      if (!failed && $("status").textContent !== "stopped") setStatus(statements.length ? "done" : "nothing to run");
    } finally {
      $("run").disabled = false;
      refreshVocabulary();
      if (currentPane) showPane(currentPane);
    }
  }

  /** A statement error's ``line L:C`` (1-based, of the statement sent) as a range of the editor. */
  function showError(e, stmt, block) {
    const message = e.message || String(e);
    block.append(el("div", { className: "error", id: "error-message" }, message));
    const m = message.match(/^line (\d+):(\d+)/);
    if (m && stmt) {
      const line = Number(m[1]);
      const column = Number(m[2]);
      const lines = stmt.text.split("\n");
      let offset = stmt.start;
      for (let i = 0; i < line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
      offset += Math.max(0, column - 1);
      const source = $("editor").value;
      let end = offset + 1;
      while (end < source.length && /[A-Za-z0-9_]/.test(source[end]) && /[A-Za-z0-9_]/.test(source[offset])) end++;
      const editorLines = source.slice(0, offset).split("\n");
      tab().error = { start: offset, end: Math.max(end, offset + 1), line: editorLines.length,
                      column: editorLines[editorLines.length - 1].length + 1, message };
      renderHighlight();
      $("editor").setSelectionRange(offset, offset);
      setStatus(`error at line ${tab().error.line}, column ${tab().error.column}`);
    } else {
      setStatus("error");
    }
  }

  function renderEntities(entities, block) {
    for (const entity of Array.isArray(entities) ? entities : [entities]) block.append(renderEntity(entity));
  }

  /** One /ksql answer: a table for each list it holds, its scalar fields as text. */
  function renderEntity(entity) {
    const box = el("div", { className: "entity" });
    if (!entity || typeof entity !== "object") { box.append(el("div", { className: "message" }, text(entity))); return box; }
    if (entity.commandStatus) {
      box.append(el("div", { className: "message" }, entity.commandStatus.message || entity.commandStatus.status));
      return box;
    }
    if (entity["@type"] === "sourceDescription") return renderSource(entity.sourceDescription);
    if (entity["@type"] === "describe_function") return renderFunction(entity);
    if (entity.queryDescription && entity.queryDescription.executionPlan) {
      box.append(el("pre", { className: "message" }, entity.queryDescription.executionPlan));
      return box;
    }
    for (const [key, value] of Object.entries(entity)) {
      if (["@type", "statementText", "warnings"].includes(key)) continue;
      if (Array.isArray(value) && value.length && typeof value[0] === "object" && value[0] !== null) {
        const columns = [...new Set(value.flatMap((v) => Object.keys(v)))];
        box.append(table(columns, value.map((v) => columns.map((c) => v[c]))));
      } else if (Array.isArray(value) && !value.length) {
        box.append(el("div", { className: "message" }, `(no ${key})`));
      } else {
        box.append(el("div", { className: "message" }, `${key}: ${text(value)}`));
      }
    }
    for (const warning of entity.warnings || []) box.append(el("div", { className: "error" }, warning.message || text(warning)));
    return box;
  }

  function renderSource(desc) {
    const box = el("div", { className: "entity source" });
    box.append(el("div", { className: "message" },
      `${desc.type || ""} ${desc.name} — topic ${desc.topic}, ${desc.partitions ?? "?"} partitions, key ${desc.keyFormat}, value ${desc.valueFormat}`));
    box.append(table(["column", "type", ""], (desc.fields || []).map((f) => [f.name, f.schema && f.schema.type, f.type || ""])));
    const queries = (label, list) => box.append(el("div", { className: "message" },
      `${label}: ${(list || []).map((q) => q.id).join(", ") || "none"}`));
    queries("read by", desc.readQueries);
    queries("written by", desc.writeQueries);
    return box;
  }

  function renderFunction(entity) {
    const box = el("div", { className: "entity function" });
    box.append(el("div", { className: "message" }, `${entity.name} (${entity.type}) ${entity.description || ""}`));
    for (const f of entity.functions || []) {
      const args = (f.arguments || []).map((a) => a.type + (a.isVariadic ? "..." : ""));
      box.append(el("div", { className: "message signature" }, `${entity.name}(${args.join(", ")}) → ${f.returnType}`));
    }
    return box;
  }

  // --- queries: pull results as a table, push rows as a bounded live list ----------------------

  async function runQuery(stmt, block) {
    const push = /\bEMIT\s+(CHANGES|FINAL)\b/i.test(stmt.text) || firstWord(stmt.text) === "PRINT";
    const controller = new AbortController();
    const t = tab();
    const resp = await fetch("/query-stream", {
      method: "POST", credentials: "same-origin", signal: controller.signal,
      headers: { Accept: DELIMITED, "Content-Type": "application/json" },
      body: JSON.stringify({ sql: stmt.text, properties: t.properties, sessionVariables: t.variables }),
    });
    if (!resp.ok) {
      const raw = await resp.text();
      let body = raw;
      try { body = JSON.parse(raw); } catch (e) { /* text */ }
      if (resp.status === 401) showLogin();
      throw new ApiError(resp.status, body);
    }
    const view = new RowView(block, push);
    current = { controller, view, queryId: null, stopped: false };
    $("stop").disabled = false;
    $("pause").disabled = !push;
    setStatus(push ? "streaming… (Stop ends the query)" : "running…");
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let first = true;
    let error = null;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (!line.trim()) continue;
          let parsed;
          try { parsed = JSON.parse(line); } catch (e) { parsed = undefined; }
          if (first && parsed && parsed.columnNames) {
            current.queryId = parsed.queryId;
            view.header(parsed.columnNames);
          } else if (Array.isArray(parsed)) {
            view.add(parsed);
          } else if (parsed && typeof parsed === "object" && parsed.message !== undefined) {
            error = new ApiError(400, parsed);
          } else {
            if (first) view.header(["record"]);
            view.add([line]);
          }
          first = false;
        }
      }
    } catch (e) {
      if (!(current && current.stopped)) throw e;
    } finally {
      const stopped = current && current.stopped;
      view.finish(stopped ? "stopped" : "complete");
      current = null;
      $("stop").disabled = true;
      $("pause").disabled = true;
      $("pause").textContent = "Pause";
    }
    if (error) throw error;
  }

  /** Rows of one query. Push rows are drawn once per animation frame, and only the latest
   *  MAX_PUSH_ROWS stay on the page, however fast they arrive. */
  class RowView {
    constructor(block, push) {
      this.push = push;
      this.info = el("div", { className: "push-info" });
      this.body = el("tbody");
      this.table = el("table", { className: push ? "push-rows" : "pull-rows" }, el("thead"), this.body);
      this.received = 0;
      this.pending = [];
      this.paused = false;
      this.scheduled = false;
      block.append(this.info, this.table);
    }

    header(columns) {
      this.table.tHead.replaceChildren(el("tr", {}, ...columns.map((c) => el("th", {}, c))));
    }

    add(row) {
      this.received += 1;
      this.pending.push(row);
      if (this.pending.length > MAX_PUSH_ROWS) this.pending.splice(0, this.pending.length - MAX_PUSH_ROWS);
      if (!this.scheduled && !this.paused) {
        this.scheduled = true;
        requestAnimationFrame(() => this.flush());
      }
    }

    flush() {
      this.scheduled = false;
      if (this.paused) return;
      const fragment = document.createDocumentFragment();
      for (const row of this.pending) fragment.append(el("tr", {}, ...row.map((v) => el("td", {}, text(v)))));
      this.pending = [];
      this.body.append(fragment);
      while (this.body.rows.length > MAX_PUSH_ROWS) this.body.deleteRow(0);
      this.info.textContent = this.push
        ? `${this.received} rows received, the latest ${this.body.rows.length} shown${this.paused ? " (paused)" : ""}`
        : `${this.received} rows`;
      this.info.dataset.received = String(this.received);
    }

    setPaused(paused) {
      this.paused = paused;
      if (!paused) this.flush();
    }

    finish(how) {
      this.paused = false;
      this.flush();
      this.info.textContent += ` — ${how}`;
      this.table.dataset.state = how;
    }
  }

  function stopCurrent() {
    if (!current) return;
    current.stopped = true;
    if (current.queryId) api("POST", "/close-query", { queryId: current.queryId }).catch(() => {});
    current.controller.abort();
  }

  $("run").addEventListener("click", runEditor);
  $("stop").addEventListener("click", () => { stopCurrent(); setStatus("stopped"); });
  $("pause").addEventListener("click", () => {
    if (!current) return;
    const paused = !current.view.paused;
    current.view.setPaused(paused);
    $("pause").textContent = paused ? "Resume" : "Pause";
  });

  // --- catalog --------------------------------------------------------------------------------

  let currentPane = null;
  const may = (role) => ROLES.indexOf(me.role) >= ROLES.indexOf(role);
  const quoteName = (name) => "`" + name.replace(/`/g, "``") + "`";
  const quoteString = (value) => "'" + value.replace(/'/g, "''") + "'";

  function item(name, meta, onclick, ...buttons) {
    return el("div", { className: "item", dataset: { name } }, el("span", { className: "name", onclick }, name),
              meta ? el("span", { className: "meta" }, meta) : null, ...buttons);
  }

  function detail(...children) { $("catalog-detail").replaceChildren(...children); }

  function detailError(e) { detail(el("div", { className: "error" }, e.message || String(e))); }

  async function showDetail(statement) {
    try {
      const box = el("div");
      renderEntities(await ksql(statement), box);
      detail(box);
    } catch (e) { detailError(e); }
  }

  function actionButton(label, role, statement) {
    const allowed = may(role);
    return el("button", { type: "button", className: "action", dataset: { action: label },
                          disabled: !allowed, title: allowed ? `${label} (needs role ${role})` : `needs role ${role}`,
                          onclick: async (event) => {
                            event.stopPropagation();
                            try {
                              const box = el("div");
                              renderEntities(await ksql(statement), box);
                              detail(box);
                            } catch (e) { detailError(e); }
                            showPane(currentPane);
                          } }, label);
  }

  const panes = {
    async streams() { return sources("STREAMS", "streams"); },
    async tables() { return sources("TABLES", "tables"); },
    async topics() {
      const [entity] = await ksql("SHOW TOPICS;");
      return (entity.topics || []).map((t) => item(t.name, `${(t.replicaInfo || []).length} partitions`, () => peek(t.name)));
    },
    async queries() {
      const [entity] = await ksql("SHOW QUERIES;");
      const rates = await metrics().catch(() => ({}));
      return (entity.queries || []).map((q) => {
        const m = rates[q.id] || {};
        const meta = `${q.state} · ${fmt(m.rate)} rows/s · lag ${fmt(m.lag)}`;
        return item(q.id, meta, () => showDetail(`EXPLAIN ${q.id};`),
                    actionButton("PAUSE", "developer", `PAUSE ${q.id};`),
                    actionButton("RESUME", "developer", `RESUME ${q.id};`),
                    actionButton("TERMINATE", "developer", `TERMINATE ${q.id};`));
      });
    },
    async connectors() {
      const [entity] = await ksql("SHOW CONNECTORS;");
      return (entity.connectors || []).map((c) => item(c.name, `${c.type} · ${c.state}`,
        () => showDetail(`DESCRIBE CONNECTOR ${quoteName(c.name)};`),
        actionButton("DROP", "admin", `DROP CONNECTOR ${quoteName(c.name)};`)));
    },
    async functions() {
      const [entity] = await ksql("SHOW FUNCTIONS;");
      return (entity.functions || []).map((f) => item(f.name, `${f.type} · ${f.category}`,
        () => showDetail(`DESCRIBE FUNCTION ${f.name};`)));
    },
  };

  async function sources(what, key) {
    const [entity] = await ksql(`SHOW ${what};`);
    return (entity[key] || []).map((s) => item(s.name, `${s.topic} · ${s.keyFormat}/${s.valueFormat}`,
      () => showDetail(`DESCRIBE ${quoteName(s.name)} EXTENDED;`)));
  }

  /** A topic's first records, as PRINT shows them (stopped after 10 records or 3 seconds). */
  async function peek(topic) {
    const controller = new AbortController();
    const lines = el("ol", { className: "peek" });
    detail(el("div", { className: "message" }, `PRINT ${topic}`), lines);
    const timer = setTimeout(() => controller.abort(), 3000);
    try {
      const resp = await fetch("/query-stream", {
        method: "POST", credentials: "same-origin", signal: controller.signal,
        headers: { Accept: DELIMITED, "Content-Type": "application/json" },
        body: JSON.stringify({ sql: `PRINT ${quoteString(topic)} FROM BEGINNING LIMIT 10;`, properties: {} }),
      });
      if (!resp.ok) {
        const raw = await resp.text();
        let body = raw;
        try { body = JSON.parse(raw); } catch (e) { /* text */ }
        throw new ApiError(resp.status, body);
      }
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          lines.append(el("li", {}, buffer.slice(0, newline)));
          buffer = buffer.slice(newline + 1);
        }
      }
    } catch (e) {
      if (e.name !== "AbortError") detail(el("div", { className: "error" }, e.message));
    } finally {
      clearTimeout(timer);
      if (!lines.children.length && lines.isConnected) lines.append(el("li", {}, "(no records yet)"));
    }
  }

  async function showPane(name) {
    currentPane = name;
    for (const button of document.querySelectorAll("button.cat")) button.classList.toggle("active", button.dataset.pane === name);
    try {
      const items = await panes[name]();
      $("catalog-list").replaceChildren(...(items.length ? items : [el("div", { className: "meta" }, `no ${name}`)]));
      $("catalog-list").dataset.pane = name;
    } catch (e) {
      $("catalog-list").replaceChildren(el("div", { className: "error" }, e.message));
    }
  }

  for (const button of document.querySelectorAll("button.cat")) button.addEventListener("click", () => showPane(button.dataset.pane));

  // --- metrics --------------------------------------------------------------------------------

  const fmt = (n) => (n === undefined || n === null || Number.isNaN(n) ? "–" : (Math.round(n * 10) / 10).toLocaleString("en"));

  /** Per query from /metrics (Prometheus text): rows/s, rows in, lag; "" holds the processing log's total. */
  async function metrics() {
    const resp = await fetch("/metrics", { credentials: "same-origin" });
    if (resp.status === 401) showLogin();
    if (!resp.ok) throw new ApiError(resp.status, await resp.text());
    const out = {};
    const get = (q) => (out[q] = out[q] || {});
    for (const line of (await resp.text()).split("\n")) {
      const m = line.match(/^(streamsql_[a-z_]+)\{([^}]*)\}\s+(\S+)/);
      if (!m) continue;
      const labels = {};
      for (const [, k, v] of m[2].matchAll(/(\w+)="((?:\\.|[^"])*)"/g)) labels[k] = v.replace(/\\(.)/g, "$1");
      const value = Number(m[3]);
      if (m[1] === "streamsql_query_processed_rows_per_second") get(labels.query).rate = value;
      else if (m[1] === "streamsql_query_input_rows_total") get(labels.query).rows = value;
      else if (m[1] === "streamsql_query_consumer_lag") get(labels.query).lag = (get(labels.query).lag || 0) + value;
      else if (m[1] === "streamsql_query_up") get(labels.query).up = value;
      else if (m[1] === "streamsql_processing_log_records_total") get("").logged = value;
    }
    return out;
  }

  // --- the pipeline view ----------------------------------------------------------------------

  let pipelineTimer = null;
  const previousRows = {};
  let previousAt = 0;

  function showView(name) {
    $("editor-view").hidden = name !== "editor";
    $("pipeline-view").hidden = name !== "pipeline";
    $("nav-editor").classList.toggle("active", name === "editor");
    $("nav-pipeline").classList.toggle("active", name === "pipeline");
    clearInterval(pipelineTimer);
    pipelineTimer = null;
    if (name === "pipeline") {
      drawPipeline();
      pipelineTimer = setInterval(drawPipeline, 2000);
    }
  }

  $("nav-editor").addEventListener("click", () => showView("editor"));
  $("nav-pipeline").addEventListener("click", () => showView("pipeline"));
  $("pipeline-query").addEventListener("change", drawPipeline);

  let drawing = false;

  async function drawPipeline() {
    if (drawing || $("app").hidden) return;
    drawing = true;
    try {
      const chosen = $("pipeline-query").value;
      const [graph, rates, log] = await Promise.all([
        api("GET", "/topology" + (chosen ? "?query=" + encodeURIComponent(chosen) : "")),
        metrics().catch(() => ({})),
        api("GET", "/processing-log?limit=20").catch(() => null),
      ]);
      const now = performance.now();
      for (const [q, m] of Object.entries(rates)) {
        if (m.rows === undefined) continue;
        // rows/s over the refresh: Spark's own figure is 0 between micro-batches
        const before = previousRows[q];
        m.recent = before !== undefined && now > previousAt ? Math.max(0, (m.rows - before) * 1000 / (now - previousAt)) : undefined;
        previousRows[q] = m.rows;
      }
      previousAt = now;
      updateQueryChoice(graph);
      $("pipeline-canvas").replaceChildren(renderGraph(graph, rates));
      renderProcessingLog(log, rates[""] && rates[""].logged);
      $("pipeline-status").textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      $("pipeline-status").textContent = e.message;
    } finally {
      drawing = false;
    }
  }

  function updateQueryChoice(graph) {
    const select = $("pipeline-query");
    if (select.value) return;
    const ids = graph.nodes.filter((n) => n.kind === "query").map((n) => n.label);
    const have = [...select.options].slice(1).map((o) => o.value);
    if (ids.join("\n") === have.join("\n")) return;
    select.replaceChildren(el("option", { value: "" }, "all queries"), ...ids.map((id) => el("option", { value: id }, id)));
  }

  function renderProcessingLog(log, total) {
    $("processing-log-count").textContent = total !== undefined ? `(${total} records)` : "";
    const entries = (log && log.entries) || [];
    $("processing-log-entries").replaceChildren(...entries.slice().reverse().map((entry) =>
      el("li", {}, `${new Date(entry.timestamp).toISOString()} ${entry.message === null ? "null" : entry.message}`)));
    if (!entries.length) $("processing-log-entries").replaceChildren(el("p", { className: "meta" }, "no records: every record so far was processed"));
  }

  const SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attrs, textValue) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (textValue !== undefined) node.textContent = textValue;
    return node;
  }

  /** Sources on the left, queries in the middle, sinks to the right: each node in the column
   *  after the longest path reaching it. A query's steps are folded into the query's box. */
  function renderGraph(graph, rates) {
    const owner = {};
    for (const n of graph.nodes) if (n.kind === "step") owner[n.id] = "query:" + n.query;
    const nodes = graph.nodes.filter((n) => n.kind !== "step");
    const byId = Object.fromEntries(nodes.map((n) => [n.id, n]));
    const edges = [];
    const seen = new Set();
    for (const e of graph.edges) {
      const source = owner[e.source] || e.source;
      const target = owner[e.target] || e.target;
      if (source === target || !byId[source] || !byId[target]) continue;
      const key = `${source}\u0000${target}`;
      if (seen.has(key)) continue;
      seen.add(key);
      edges.push({ source, target, label: e.label, side: e.side });
    }
    const column = Object.fromEntries(nodes.map((n) => [n.id, 0]));
    for (let round = 0; round < nodes.length; round++) {
      let changed = false;
      for (const e of edges) {
        if (e.side) continue;
        if (column[e.target] < column[e.source] + 1) { column[e.target] = column[e.source] + 1; changed = true; }
      }
      if (!changed) break;
    }
    for (const e of edges) if (e.side) column[e.target] = Math.max(column[e.target], column[e.source] + 1);
    const W = 200, H = 62, GX = 48, GY = 22;
    const rows = {};
    const place = {};
    for (const n of nodes) {
      const c = column[n.id];
      rows[c] = (rows[c] || 0) + 1;
      place[n.id] = { x: 10 + c * (W + GX), y: 10 + (rows[c] - 1) * (H + GY) };
    }
    const width = 20 + (Math.max(0, ...Object.values(column)) + 1) * (W + GX);
    const height = 20 + Math.max(1, ...Object.values(rows)) * (H + GY);
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "pipeline" });
    root.append(svg("defs"));
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#7b8794" }));
    root.firstChild.append(marker);
    for (const e of edges) {
      const a = place[e.source], b = place[e.target];
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      const mid = (x1 + x2) / 2;
      root.append(svg("path", { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
                                class: "edge" + (e.side ? " side" : ""), "marker-end": "url(#arrow)" }));
      if (e.label) root.append(svg("text", { x: mid, y: (y1 + y2) / 2 - 4, "text-anchor": "middle", class: "edge-label" }, e.label));
    }
    for (const n of nodes) {
      const p = place[n.id];
      const g = svg("g", { class: `node ${n.kind}${n.internal ? " internal" : ""}`, transform: `translate(${p.x},${p.y})`,
                           "data-id": n.id, "data-kind": n.kind });
      g.append(svg("title", {}, n.detail ? `${n.label}\n${n.detail}` : n.label));
      g.append(svg("rect", { width: W, height: H, rx: n.kind === "query" ? 10 : 4 }));
      g.append(svg("text", { x: 8, y: 14, class: "kind" }, n.internal ? `${n.kind} (internal)` : n.kind));
      g.append(svg("text", { x: 8, y: 30, class: "label" }, n.label.length > 27 ? n.label.slice(0, 26) + "…" : n.label));
      if (n.kind === "query") {
        const m = rates[n.label] || {};
        const rate = Math.max(m.rate || 0, m.recent || 0);
        const stats = svg("text", { x: 8, y: 46, class: "stats", "data-rate": rate, "data-rows": m.rows ?? "" },
                          `${fmt(rate)} rows/s · ${fmt(m.rows)} in · lag ${fmt(m.lag)}`);
        g.append(stats);
        if (m.up === 0) g.append(svg("text", { x: 8, y: 58, class: "stats errors" }, "stopped or failed"));
      } else if (n.detail && n.kind !== "topic") {
        g.append(svg("text", { x: 8, y: 46, class: "kind" }, n.detail.length > 29 ? n.detail.slice(0, 28) + "…" : n.detail));
      } else if (n.detail) {
        g.append(svg("text", { x: 8, y: 46, class: "kind" }, n.detail));
      }
      if (n.detail === "processing log" && rates[""] && rates[""].logged !== undefined) {
        g.append(svg("text", { x: 8, y: 58, class: "stats errors" }, `${rates[""].logged} records`));
      }
      root.append(g);
    }
    return root;
  }

  // --- start ----------------------------------------------------------------------------------

  newTab("");
  start();
})();
