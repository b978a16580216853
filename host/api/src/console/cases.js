// Cases and reviews: each Case's tasks by status, and the queue of tasks waiting for a
// person's review (decided by those who may edit the project).
import { api, backTo, can, el, enc, refusal, projectAccess, readOnlyNote, say, show, table, time } from './lib.js';

/** Cases of the project with their tasks by state, and the review queue: a task in review
 * shows its inputs and proposed outputs; a person approves it or rejects it with a note. */
export async function cases(pid) {
  const P = `/projects/${enc(pid)}`;
  const [list, access] = await Promise.all([api('GET', `${P}/cases?tasks=true`), projectAccess(pid)]);
  const mayEdit = can(access, 'edit');
  const pretty = (v) => el('pre', { class: 'mono', tabindex: 0 }, JSON.stringify(v === undefined ? null : v, null, 2));
  const sections = [];
  const queue = [];
  for (const c of list.data) {
    const tasks = c.tasks || [];
    for (const t of tasks.filter((t) => t.status === 'review')) {
      if (!mayEdit) {
        queue.push(el('section', { class: 'card review', 'data-task': t.id },
          el('h2', {}, `${c.name} · task ${t.id.slice(0, 12)}`),
          el('div', { class: 'grid' }, el('div', {}, el('strong', {}, 'Inputs'), pretty(t.inputs)), el('div', {}, el('strong', {}, 'Proposed outputs'), pretty(t.outputs)))));
        continue;
      }
      const note = el('textarea', { 'aria-label': 'Note', rows: 2, class: 'note', placeholder: 'A note for the record (required to reject)' });
      const err = el('p', { class: 'error', role: 'alert' });
      const decide = async (decision) => {
        err.textContent = '';
        if (decision === 'reject' && !note.value.trim()) { err.textContent = 'Say why it is rejected.'; return; }
        try {
          await api('POST', `${P}/tasks/${enc(t.id)}/review`, { decision, comment: note.value.trim() || undefined });
          say(`Task ${t.id.slice(0, 12)} ${decision === 'approve' ? 'approved' : 'rejected'}`);
          await cases(pid);
        } catch (e) { err.textContent = await refusal(e, 'review tasks', pid, access); }
      };
      queue.push(el('section', { class: 'card review', 'data-task': t.id },
        el('h2', {}, `${c.name} · task ${t.id.slice(0, 12)}`),
        el('div', { class: 'grid' }, el('div', {}, el('strong', {}, 'Inputs'), pretty(t.inputs)), el('div', {}, el('strong', {}, 'Proposed outputs'), pretty(t.outputs))),
        note,
        el('p', { class: 'actions' },
          el('button', { type: 'button', class: 'primary approve', onclick: () => decide('approve') }, 'Approve'),
          el('button', { type: 'button', class: 'reject', onclick: () => decide('reject') }, 'Reject')),
        err));
    }
    const rows = tasks.map((t) => el('tr', { 'data-task': t.id },
      el('td', { class: 'mono' }, t.id.slice(0, 12)), el('td', { class: 'status' }, t.status),
      el('td', { class: 'muted' }, time(t.createdAt)), el('td', {}, t.error ? `${t.error.code}: ${t.error.message}` : '')));
    sections.push(el('div', { class: 'card' }, el('h2', {}, `${c.name}${c.review ? ' (review)' : ''}`), rows.length
      ? table({ class: 'tasks' }, ['Task', 'Status', 'Created', 'Error'], rows)
      : el('p', { class: 'muted' }, 'No tasks.')));
  }
  show(el('h1', {}, 'Cases'),
    readOnlyNote(access),
    el('p', {}, backTo(pid)),
    el('h2', {}, 'Waiting for review'),
    queue.length ? el('div', { id: 'queue' }, queue) : el('p', { class: 'muted', id: 'queue' }, 'Nothing waits for a review.'),
    ...(sections.length ? sections : [el('p', { class: 'muted' }, 'No Cases: `botbox case create` makes one.')]));
}
