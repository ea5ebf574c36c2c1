// sluicegate dashboard: fetches /api/... and renders with text nodes only (no innerHTML anywhere).
"use strict";

const STATES = ["", "Pending", "QuotaReserved", "Admitted", "Finished", "Inactive"];
let current = null;        // {name, params, body}
let refreshTimer = null;   // a pending refresh after live events
let pollTimer = null;      // nodes: heartbeats are not watch events

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function amount(a) { return a ? a.text : "–"; }
function when(t) { return t ? new Date(t * 1000).toLocaleString() : ""; }
function stateCell(s, cls) { return el("td", {class: `${cls || "state"} state-${s}`}, s); }
function num(v, cls) { return el("td", {class: `num ${cls}`}, v); }
function workloadHref(ns, name) { return `#/workload/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`; }

function bar(used, nominal, borrowed) {
  const cap = Math.max(nominal ? nominal.value : 0, used ? used.value : 0, 1);
  const own = Math.min(used ? used.value : 0, nominal ? nominal.value : 0);
  const b = el("span", {class: "bar", title: `${amount(used)} of ${amount(nominal)}`});
  const inner = el("span"); inner.style.width = `${(100 * own / cap).toFixed(1)}%`; b.append(inner);
  if (borrowed && borrowed.value > 0) {
    const over = el("span", {class: "borrow"});
    over.style.left = `${(100 * own / cap).toFixed(1)}%`;
    over.style.width = `${(100 * borrowed.value / cap).toFixed(1)}%`;
    b.append(over);
  }
  return b;
}

async function api(path) {
  const r = await fetch(path, {credentials: "same-origin", headers: {Accept: "application/json"}});
  let body = null;
  try { body = await r.json(); } catch (e) { body = {error: `HTTP ${r.status}`}; }
  if (r.status === 401) { window.location.assign("/login"); throw new Error(body.error); }
  if (!r.ok) { const err = new Error(body.error || `HTTP ${r.status}`); err.status = r.status; err.body = body; throw err; }
  return body;
}

function problem(err) {
  if (err.status === 503 && err.body && err.body.role === "follower") {
    return el("p", {class: "error", id: "follower"}, "This controller is a follower; ",
              err.body.leader ? `the leader is ${err.body.leader}.` : "the leader is not known yet.");
  }
  return el("p", {class: "error denied"}, err.message);
}

function resourceTable(rows) {
  if (!rows.length) return el("p", {class: "muted"}, "no quota of its own");
  return el("table", {class: "quota"},
    el("thead", {}, el("tr", {}, ["Flavor", "Resource", "Usage", "Nominal", "Borrowed", "Borrowing limit",
                                   "Lending limit"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {"data-key": `${r.flavor}/${r.resource}`},
      el("td", {}, r.flavor), el("td", {}, r.resource),
      el("td", {class: "usage"}, bar(r.usage, r.nominal, r.borrowed), amount(r.usage)),
      num(amount(r.nominal), "nominal"), num(amount(r.borrowed), "borrowed"),
      num(amount(r.borrowingLimit), "borrowing-limit"), num(amount(r.lendingLimit), "lending-limit")))));
}

// ------------------------------------------------------------------ views

const views = {
  async cohorts(body) {
    const t = await api("/api/tree");
    const kids = new Map();
    const add = (parent, item) => { const k = parent || ""; if (!kids.has(k)) kids.set(k, []); kids.get(k).push(item); };
    for (const c of t.cohorts) add(c.parent, {kind: "cohort", ...c});
    for (const q of t.clusterQueues) add(q.cohort, {kind: "cq", ...q});
    const seen = new Set();
    const render = (items) => el("ul", {class: "tree"}, items.map((it) => {
      const key = `${it.kind}/${it.name}`;
      if (seen.has(key)) return null;
      seen.add(key);
      const title = it.kind === "cohort"
        ? el("div", {class: "node-title"}, `Cohort ${it.name}`, it.explicit ? "" : el("span", {class: "muted"}, " (named by its queues)"))
        : el("div", {class: "node-title"}, `ClusterQueue ${it.name} `,
             el("span", {class: "muted counts"}, `pending ${it.pending} · admitted ${it.admitted} · reserving ${it.reserving}`));
      return el("li", {"data-key": key}, title, resourceTable(it.resources),
                it.kind === "cohort" ? render(kids.get(it.name) || []) : null);
    }));
    body.replaceChildren(el("h1", {}, "Cohorts and ClusterQueues"), render(kids.get("") || []));
  },

  async queues(body) {
    const parts = [el("h1", {}, "Queues"), el("h2", {}, "ClusterQueues")];
    try {
      const t = await api("/api/tree");
      parts.push(el("table", {id: "clusterqueues"},
        el("thead", {}, el("tr", {}, ["Name", "Cohort", "Pending", "Reserving", "Admitted", "Active"].map((h) => el("th", {}, h)))),
        el("tbody", {}, t.clusterQueues.map((q) => el("tr", {"data-key": q.name},
          el("td", {class: "name"}, q.name), el("td", {}, q.cohort || ""), num(q.pending, "pending"),
          num(q.reserving, "reserving"), num(q.admitted, "admitted"),
          el("td", {class: q.active ? "state-True" : "state-False", title: q.message}, q.active ? "yes" : q.reason))))));
    } catch (err) { if (err.status === 503) throw err; parts.push(problem(err)); }
    parts.push(el("h2", {}, "LocalQueues"));
    const lqs = await api("/api/localqueues");
    parts.push(el("table", {id: "localqueues"},
      el("thead", {}, el("tr", {}, ["Namespace", "Name", "ClusterQueue", "Pending", "Reserving", "Admitted"].map((h) => el("th", {}, h)))),
      el("tbody", {}, lqs.map((q) => el("tr", {"data-key": `${q.namespace}/${q.name}`},
        el("td", {}, q.namespace), el("td", {class: "name"}, q.name), el("td", {}, q.clusterQueue),
        num(q.pending, "pending"), num(q.reserving, "reserving"), num(q.admitted, "admitted"))))));
    body.replaceChildren(...parts);
  },

  async workloads(body, params) {
    let form = body.querySelector("form.filters");
    if (!form) {
      const field = (name, placeholder) => el("input", {name, placeholder, value: params.get(name) || ""});
      form = el("form", {class: "filters", onsubmit: (e) => e.preventDefault()},
        field("namespace", "namespace"), field("queue", "queue"),
        el("select", {name: "state"}, STATES.map((s) => el("option", {value: s, selected: params.get("state") === s}, s || "any state"))),
        field("text", "name or label contains"));
      const apply = () => {
        const q = new URLSearchParams();
        for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
        history.replaceState(null, "", `#/workloads${q.toString() ? "?" + q : ""}`);
        refresh();
      };
      let typing = null;
      form.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(apply, 250); });
      form.addEventListener("change", apply);
      body.replaceChildren(el("h1", {}, "Workloads"), form, el("div", {id: "workload-list"}));
    }
    const q = new URLSearchParams();
    for (const k of ["namespace", "queue", "state", "text"]) if (params.get(k)) q.set(k, params.get(k));
    const res = await api(`/api/workloads?${q}`);
    const shown = res.items.length < res.total ? ` (newest ${res.items.length} shown)` : "";
    body.querySelector("#workload-list").replaceChildren(
      el("p", {class: "muted", id: "workload-count"}, `${res.total} workload(s)${shown}`),
      el("table", {id: "workloads"},
        el("thead", {}, el("tr", {}, ["Namespace", "Name", "Queue", "ClusterQueue", "State", "Priority", "Running/pods", "Created", "Message"].map((h) => el("th", {}, h)))),
        el("tbody", {}, res.items.map((w) => el("tr", {"data-key": `${w.namespace}/${w.name}`},
          el("td", {}, w.namespace), el("td", {class: "name"}, el("a", {href: workloadHref(w.namespace, w.name)}, w.name)),
          el("td", {}, w.queue), el("td", {}, w.clusterQueue), stateCell(w.state), num(w.priority, "priority"),
          num(`${w.running}/${w.pods}`, "pods"), el("td", {class: "created"}, when(w.created)), el("td", {class: "muted"}, w.message))))));
  },

  async workload(body, params, rest) {
    const [ns, name] = rest.map(decodeURIComponent);
    const w = await api(`/api/workloads/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
    const flavorsOf = (podSet) => {
      if (!w.admission) return "not admitted";
      const a = w.admission.podSets.find((x) => x.name === podSet);
      return a ? Object.entries(a.flavors).map(([r, f]) => `${r}: ${f}`).join(", ") : "";
    };
    body.replaceChildren(
      el("h1", {}, `Workload ${w.namespace}/`, el("span", {id: "workload-name"}, w.name)),
      el("dl", {},
        el("dt", {}, "State"), el("dd", {class: `state state-${w.state}`}, w.state),
        el("dt", {}, "Queue"), el("dd", {}, `${w.queue} → ${w.clusterQueue || "?"}`),
        el("dt", {}, "Priority"), el("dd", {}, w.priority),
        el("dt", {}, "Created"), el("dd", {}, when(w.created)),
        el("dt", {}, "Requeued"), el("dd", {}, `${w.requeues} time(s)`),
        el("dt", {}, "Labels"), el("dd", {class: "labels"}, Object.entries(w.labels).map(([k, v]) => `${k}=${v}`).join(", ") || "none"),
        el("dt", {}, "Annotations"), el("dd", {class: "annotations"}, Object.keys(w.annotations).length
          ? Object.entries(w.annotations).map(([k, v]) => el("div", {}, `${k}: ${v}`)) : "none")),
      el("h2", {}, "Pod sets"),
      el("table", {id: "podsets"},
        el("thead", {}, el("tr", {}, ["Pod set", "Count", "Requests per pod", "Flavors"].map((h) => el("th", {}, h)))),
        el("tbody", {}, w.podSets.map((p) => el("tr", {},
        el("td", {}, p.name), num(p.count, "count"), el("td", {}, Object.entries(p.requests).map(([r, v]) => `${r}=${v}`).join(", ")),
        el("td", {class: "flavors"}, flavorsOf(p.name)))))),
      el("h2", {}, "Conditions (oldest first)"),
      el("table", {id: "conditions"},
        el("thead", {}, el("tr", {}, ["Type", "Status", "Reason", "Message", "Since"].map((h) => el("th", {}, h)))),
        el("tbody", {}, w.conditions.map((c) => el("tr", {"data-key": c.type},
          el("td", {}, c.type), stateCell(c.status), el("td", {}, c.reason), el("td", {}, c.message), el("td", {}, when(c.lastTransitionTime)))))),
      el("h2", {}, "Pods"),
      w.podRecords.length ? el("table", {id: "pods"},
        el("thead", {}, el("tr", {}, ["Pod", "Node", "Phase", "Reason", "Exit", "Restarts", "Started", "Finished"].map((h) => el("th", {}, h)))),
        el("tbody", {}, w.podRecords.map((p) => el("tr", {"data-key": p.name},
          el("td", {}, p.name), el("td", {class: "node"}, p.node), el("td", {class: "phase"}, p.phase),
          el("td", {title: p.message}, p.reason), num(p.exitCode ?? "", "exit"), num(p.restarts, "restarts"),
          el("td", {}, when(p.startedAt)), el("td", {}, when(p.finishedAt))))))
        : el("p", {class: "muted"}, "no pods placed"));
  },

  async nodes(body) {
    const ns = await api("/api/nodes");
    body.replaceChildren(el("h1", {}, "Nodes"), el("table", {id: "nodes"},
      el("thead", {}, el("tr", {}, ["Node", "Ready", "Pods", "Allocatable / requested", "CPU in use", "Memory in use", "Disk free", "Heartbeat"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ns.map((n) => el("tr", {"data-key": n.name},
        el("td", {class: "name"}, n.name),
        el("td", {class: n.ready ? "ready" : "notready", title: n.conditions.join(", ")}, n.ready ? "Ready" : `NotReady ${n.reason}`),
        num(n.pods, "pods"),
        el("td", {class: "resources"}, n.resources.map((r) => el("div", {"data-resource": r.resource},
          bar(r.requested, r.allocatable, null), `${r.resource}: ${amount(r.requested)} / ${amount(r.allocatable)}`))),
        num(n.usage.cpuCores.toFixed(2), "cpu"),
        num(`${amount(n.usage.memoryUsed)} / ${amount(n.usage.memoryTotal)}`, "memory"),
        num(amount(n.usage.nodefsAvailable), "disk"), el("td", {}, when(n.lastHeartbeat)))))));
  },
};

// ------------------------------------------------------------------ routing and live updates

function route() {
  const hash = window.location.hash.replace(/^#\/?/, "") || "cohorts";
  const [path, query] = hash.split("?");
  const [name, ...rest] = path.split("/");
  return {name: views[name] ? name : "cohorts", params: new URLSearchParams(query || ""), rest};
}

async function refresh() {
  if (!current) return;
  const r = route();
  current.params = r.params;
  try {
    await views[current.name](current.body, r.params, r.rest);
    current.body.dataset.loaded = String(Date.now());
  } catch (err) {
    current.body.replaceChildren(problem(err));
  }
}

function show() {
  const r = route();
  clearInterval(pollTimer);
  const main = document.getElementById("main");
  const body = el("section", {id: `view-${r.name}`});
  main.replaceChildren(body);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === r.name);
  current = {name: r.name, params: r.params, body};
  if (r.name === "nodes") pollTimer = setInterval(refresh, 5000);
  refresh();
}

function live() {
  const dot = document.getElementById("live");
  const es = new EventSource("/api/events");
  es.addEventListener("open", () => { dot.textContent = "live"; dot.className = "live on"; });
  es.addEventListener("error", () => { dot.textContent = "offline"; dot.className = "live off"; });
  es.addEventListener("workloads", () => {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 200);
  });
}

async function start() {
  try {
    const s = await api("/api/session");
    document.getElementById("who").textContent = `${s.user}${s.role === "follower" ? " · follower" : ""}`;
    document.getElementById("logout").hidden = !s.tls || s.method !== "token";
  } catch (err) { /* the view shows the problem */ }
  window.addEventListener("hashchange", show);
  show();
  live();
}

document.addEventListener("DOMContentLoaded", start);
