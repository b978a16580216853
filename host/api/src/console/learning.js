// Learning from production: an environment's misunderstood inbox (`#/p/<id>/misunderstood/
// <environment>`: label a group into an NLU, dismiss it, train), the replay dialog of a bot
// revision and a replay's results (`#/p/<id>/replay/<replay id>`). What users said and what
// the bot answered are put in as text only.
import { ApiError, api, backTo, can, el, enc, plural, readOnlyNote, refusal, rememberAccess, show, table, tell, time } from './lib.js';

const LIMIT = 50;
const STATUSES = [['new', 'New'], ['labelled', 'Labelled'], ['dismissed', 'Dismissed']];
const EMPTY = {
  new: 'Nothing misunderstood: every message was understood.',
  labelled: 'Nothing labelled yet.',
  dismissed: 'Nothing dismissed.',
};

/** The labels a group may be given: every label of each NLU's trait entities (named with
 *  their entity when an NLU has several). */
function labelChoices(nlus) {
  return nlus.flatMap((n) => {
    const traits = Object.entries(n.entities || {}).filter(([, e]) => e.type === 'trait');
    return traits.flatMap(([entity, e]) => (e.labels || []).map((label) =>
      ({ nlu: n.name, entity, label, text: traits.length > 1 ? `${entity}: ${label}` : label })));
  });
}

/** A drop-down of `choices` grouped by NLU; an option's value is its index. */
function labelPicker(choices, text) {
  const groups = new Map();
  choices.forEach((c, i) => {
    if (!groups.has(c.nlu)) groups.set(c.nlu, []);
    groups.get(c.nlu).push(el('option', { value: i }, c.text));
  });
  return el('select', { class: 'label-pick', 'aria-label': `Label for “${text}”` },
    [...groups].map(([nlu, options]) => el('optgroup', { label: nlu }, options)));
}

/** What a group fell to: its intent and flow. */
function fellTo(it) {
  const intent = it.intent ? it.intent : 'no intent';
  return it.flow ? `${intent} in flow ${it.flow}` : intent;
}

/** What a retraining did, as a sentence. */
function trained(nlu, a) {
  if (a.status === 'success') return `Trained ${nlu} on ${plural(a.count, 'sentence')}: the next deployment uses the new model.`;
  if (a.status === 'training') return `${nlu} is still training on ${plural(a.count, 'sentence')}: NL Studio says when it is done.`;
  return `Training ${nlu} failed${a.error ? `: ${a.error}` : '.'}`;
}

/** Environment `envName`'s misunderstood inbox, most frequent first, by status; those who
 *  may edit the project label groups into an NLU, dismiss them, and train the NLUs they
 *  labelled into. */
export async function misunderstood(pid, envName) {
  const P = `/projects/${enc(pid)}`;
  const o = await api('GET', `${P}/overview`);
  rememberAccess(pid, o.access);
  const access = o.access || null;
  const env = (o.environments || []).find((e) => e.name === envName);
  if (!env) throw new ApiError(`no environment ${envName}`);
  const mayEdit = can(access, 'edit');
  const choices = mayEdit ? labelChoices((await api('GET', `${P}/nlus`)).data || []) : [];
  const I = `${P}/environments/${enc(env.id)}/misunderstood`;
  const items = [];
  let page = 0;
  let total = 0;
  const labelled = new Set(); // NLUs labelled into on this visit: Train is offered for them
  const status = el('select', { id: 'misunderstood-status' }, STATUSES.map(([v, t]) => el('option', { value: v }, t)));
  const list = el('div', { id: 'misunderstood' }, el('p', { class: 'muted' }, 'Loading…'));
  const count = el('p', { class: 'muted', id: 'misunderstood-count', role: 'status' });
  const more = el('button', { type: 'button', id: 'misunderstood-more', hidden: true, onclick: () => load(false) }, 'More');
  const result = el('p', { class: 'result', id: 'misunderstood-result', role: 'status', hidden: true });
  const trainButtons = el('p', { class: 'actions' });
  const trainResult = el('p', { class: 'result', id: 'misunderstood-train-result', role: 'status', hidden: true });
  const trainCard = el('div', { class: 'card', id: 'misunderstood-train', hidden: true }, el('h2', {}, 'Train'),
    el('p', { class: 'muted' }, 'Labelling adds the texts to the NLU\'s sentences; training learns them.'), trainButtons, trainResult);

  // A decision on group `it`: the list is read again (the group leaves it), `done` said.
  const decide = async (it, body, done, what) => {
    try {
      await api('PUT', `${I}/${enc(it.id)}`, body);
      await load(true);
      tell(result, done);
      return true;
    } catch (e) { tell(result, await refusal(e, what, pid, access), 'error'); return false; }
  };
  const label = async (it, pick) => {
    const c = choices[Number(pick.value)];
    if (!c) return;
    const ok = await decide(it, { status: 'labelled', nluId: c.nlu, intent: c.label, entity: c.entity },
      `Labelled “${it.text}” ${c.label} in ${c.nlu}: train ${c.nlu} to learn it.`, 'label what users said');
    if (ok && !labelled.has(c.nlu)) { labelled.add(c.nlu); drawTrain(); }
  };
  const train = async (nlu, button) => {
    button.disabled = true;
    tell(trainResult, `Training ${nlu}…`);
    try {
      const a = await api('POST', `${P}/nlus/${enc(nlu)}/retrain`, {});
      tell(trainResult, trained(nlu, a), a.status === 'failed' ? 'error' : 'info');
    } catch (e) { tell(trainResult, await refusal(e, 'train NLUs', pid, access), 'error'); } finally { button.disabled = false; }
  };
  const drawTrain = () => {
    trainCard.hidden = !labelled.size;
    trainButtons.replaceChildren(...[...labelled].map((nlu) => el('button', { type: 'button', class: 'primary train', 'data-nlu': nlu,
      onclick: (ev) => train(nlu, ev.currentTarget) }, `Train ${nlu}`)));
  };

  // A labelled group says its label; others get a picker, Label and (new ones) Dismiss.
  const decision = (it) => {
    if (it.status === 'labelled') return `${it.label || ''} in ${it.nluId || ''}`;
    if (!mayEdit) return '';
    const pick = choices.length ? labelPicker(choices, it.text) : null;
    return el('span', { class: 'actions' },
      pick ? [pick, el('button', { type: 'button', class: 'label', onclick: () => label(it, pick) }, 'Label')]
        : el('span', { class: 'muted' }, 'No NLU label to give: NL Studio makes NLUs.'),
      it.status === 'new' ? el('button', { type: 'button', class: 'dismiss', onclick: () => decide(it, { status: 'dismissed' },
        `Dismissed “${it.text}”.`, 'dismiss what users said') }, 'Dismiss') : null);
  };
  const withDecision = () => mayEdit || status.value === 'labelled';
  const row = (it) => el('tr', { 'data-id': it.id, 'data-text': it.text },
    el('td', { class: 'message' }, it.text),
    el('td', { class: 'count' }, String(it.count)),
    el('td', {}, fellTo(it)),
    el('td', { class: 'muted' }, time(it.lastSeen)),
    el('td', {}, el('a', { class: 'sample-link', href: `#/p/${enc(pid)}/transcripts/${enc(env.name)}/${enc(it.sampleUserId)}` }, it.sampleUserId)),
    withDecision() ? el('td', {}, decision(it)) : null);
  const draw = () => {
    const heads = ['Text', 'Messages', 'Fell to', 'Last seen', 'A conversation', ...(withDecision() ? ['Decision'] : [])];
    list.replaceChildren(items.length ? table({ class: 'misunderstood' }, heads, items.map(row))
      : el('p', { class: 'muted', id: 'misunderstood-empty' }, EMPTY[status.value]));
    count.textContent = items.length ? `${items.length} of ${plural(total, 'group')}, most frequent first.` : '';
    more.hidden = items.length >= total;
  };
  // `fresh`: from the first page (another status, or after a decision); else the next page.
  const load = async (fresh) => {
    if (fresh) { page = 0; items.length = 0; }
    more.disabled = true;
    try {
      const q = new URLSearchParams({ status: status.value, page: String(page + 1), limit: String(LIMIT) });
      const r = await api('GET', `${I}?${q}`);
      page += 1;
      total = r.total;
      items.push(...(r.data || []));
      draw();
    } catch (e) {
      list.replaceChildren(el('p', { class: 'error', role: 'alert' }, await refusal(e, 'read this inbox', pid, access)));
    } finally { more.disabled = false; }
  };
  status.addEventListener('change', () => { tell(result, ''); load(true); });
  show(el('h1', {}, `Misunderstood · ${env.name}`),
    readOnlyNote(access),
    el('p', {}, backTo(pid), ' · what users said that the bot did not understand, grouped by text'),
    el('div', { class: 'card filters' }, el('label', { for: 'misunderstood-status', class: 'inline' }, 'Status'), status),
    result,
    el('div', { class: 'card' }, count, list, el('p', {}, more)),
    trainCard);
  await load(true);
}

/** The environment a replay reads by default: production, else the first. */
export function replayEnvironment(envs) {
  return envs.find((e) => e.name === 'production') || envs[0] || null;
}

/** The replay dialog of bot revision `rev`: which environment's conversations and how many
 *  of the newest; starts the replay and opens its page. */
export function replayDialog(pid, rev, envs, access) {
  const chosen = replayEnvironment(envs);
  const env = el('select', { id: 'replay-env' }, envs.map((e) => el('option', { value: e.id, selected: e === chosen }, e.name)));
  const last = el('input', { id: 'replay-last', type: 'number', min: 1, max: 1000, step: 1, value: 100, required: true });
  const err = el('p', { class: 'error', role: 'alert' });
  const go = el('button', { type: 'submit', class: 'primary', id: 'replay-confirm' }, 'Replay');
  const dialog = el('dialog', { id: 'replay-dialog', 'aria-labelledby': 'replay-title' });
  const close = () => dialog.close();
  dialog.addEventListener('close', () => dialog.remove());
  const form = el('form', { method: 'dialog', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const n = Number(last.value);
    if (!Number.isInteger(n) || n < 1 || n > 1000) { err.textContent = 'The number of conversations is a whole number from 1 to 1000.'; return; }
    go.disabled = true;
    try {
      const r = await api('POST', `/projects/${enc(pid)}/replays`, { environment: env.value, botRevision: rev.revision, last: n });
      close();
      location.hash = `#/p/${enc(pid)}/replay/${enc(r.id)}`;
    } catch (e) {
      // 409: a replay of the project is running; its detail says so.
      err.textContent = e instanceof ApiError && e.status === 409 ? e.said : await refusal(e, 'replay conversations', pid, access);
    } finally { go.disabled = false; }
  } },
  el('h2', { id: 'replay-title' }, `Replay bot ${rev.version}`),
  el('p', { class: 'muted' }, 'Runs this revision on the environment\'s newest recorded conversations and shows where it answers otherwise. Nothing reaches a user or an api.'),
  el('label', { for: 'replay-env' }, 'Environment'), env,
  el('label', { for: 'replay-last' }, 'Newest conversations (1–1000)'), last,
  err,
  el('p', { class: 'buttons' }, el('button', { type: 'button', onclick: close }, 'Cancel'), go));
  dialog.append(form);
  document.body.append(dialog);
  dialog.showModal();
  env.focus();
}

/** A message as its text, or `[type]` without one. */
function messageText(m) {
  return m && typeof m.content === 'string' && m.content !== '' ? m.content : `[${(m && m.type) || 'message'}]`;
}

/** One side of a difference: its replies as bubbles. */
function side(title, replies, kind) {
  return el('div', { class: `side ${kind}` }, el('h4', {}, title),
    (replies || []).length ? replies.map((m) => el('div', { class: 'bubble bot' }, messageText(m))) : el('p', { class: 'muted' }, 'No reply.'));
}

/** A conversation that did not replay identically: where it first went another way. */
function resultCard(c) {
  const d = c.firstDifference;
  return el('section', { class: `replay-result ${c.outcome}`, 'data-user': c.userId },
    el('h3', {}, `${c.userId} · ${d ? `message ${d.message} · ` : ''}${c.outcome}`),
    d ? el('p', {}, 'The user said ', el('q', { class: 'input' }, messageText(d.input))) : null,
    d ? el('div', { class: 'sides' }, side('Before: what the user got', d.before, 'before'), side('After: this revision', d.after, 'after')) : null,
    d && d.unrecordedCall ? el('p', { class: 'unrecorded' }, 'An api call that was not recorded (not made): ', el('span', { class: 'mono' }, d.unrecordedCall)) : null,
    c.error ? el('p', { class: 'error' }, c.error) : null);
}

/** A replay's state, counts and differing or failed conversations in `out`. */
function drawReplay(r, status, out) {
  const rev = String(r.botRevision || '').slice(0, 10);
  const when = `requested by ${r.requestedBy || 'unknown'} on ${time(r.createdAt)}`;
  if (r.status === 'running') {
    // Said (and focused) once, not at every read.
    const text = `Replaying bot revision ${rev} on ${r.environmentName}'s conversations… (${when})`;
    if (status.textContent !== text) tell(status, text);
    return;
  }
  if (r.status === 'failed') { tell(status, `The replay of bot revision ${rev} failed${r.error ? `: ${r.error}` : '.'}`, 'error'); return; }
  tell(status, `Replayed bot revision ${rev} on ${plural(r.conversations, 'conversation')} of ${r.environmentName}, ${when}.`);
  const counts = el('ul', { class: 'counts', id: 'replay-counts' },
    [['conversations', r.conversations], ['identical', r.identical], ['differing', r.differing], ['failed', r.failed]]
      .map(([k, v]) => el('li', { 'data-count': k }, el('span', { class: 'n' }, String(v)), ` ${k}`)));
  const other = (r.results || []).filter((c) => c.outcome !== 'identical');
  out.replaceChildren(counts, ...(other.length ? [el('h2', {}, 'Where answers differ'), ...other.map(resultCard)]
    : [el('p', { class: 'muted' }, r.conversations ? 'Every conversation was answered as before.' : `${r.environmentName} has no recorded conversation to replay.`)]));
}

/** Replay `id` of project `pid`: read every 500 ms while it runs (every 5 s after two
 *  minutes), until the page is left. */
export async function replayView(pid, id) {
  const status = el('p', { class: 'result', id: 'replay-status', role: 'status' }, 'Loading…');
  const out = el('div', { id: 'replay' });
  const title = el('h1', {}, 'Replay');
  show(title, el('p', {}, backTo(pid)), el('div', { class: 'card' }, status, out));
  for (const t0 = Date.now(); ;) {
    const r = await api('GET', `/projects/${enc(pid)}/replays/${enc(id)}`);
    if (!out.isConnected) return;
    title.textContent = `Replay on ${r.environmentName}`;
    drawReplay(r, status, out);
    if (r.status !== 'running') return;
    await new Promise((res) => setTimeout(res, Date.now() - t0 < 120_000 ? 500 : 5000));
  }
}
