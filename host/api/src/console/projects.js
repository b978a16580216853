// Projects: the list with owners, a project's page (environments with their canaries,
// revisions, deployments, a team's members), the deploy and canary dialogs, rollbacks. The
// controls shown are those the caller's role allows (`overview.access`). A revision's replay
// dialog is learning.js's.
import { IN_PLACE, api, can, copyButton, el, enc, failure, refusal, readOnlyNote, rememberAccess, say, show, table, tell, time } from './lib.js';
import { cmsLabel } from './cms.js';
import { replayDialog, replayEnvironment } from './learning.js';

/** The projects the caller reaches (its own and its teams'), each with its owner; an
 *  administrator also gets a link to every tenant's (`#/all`). */
export async function projects(me, all) {
  const page = await api('GET', `/projects?limit=100${all ? '&owner=all' : ''}`);
  const rows = page.data.map((p) => el('tr', {},
    el('td', {}, el('a', { href: `#/p/${enc(p.id)}` }, p.name)),
    el('td', {}, p.owner ? `${p.owner.name} (${p.owner.type})` : ''),
    el('td', {}, p.description || p.label || ''),
    el('td', { class: 'muted' }, time(p.updatedAt || p.createdAt))));
  const admin = me && me.roleId === 'admin' && me.credential === 'login';
  const filter = admin ? el('p', {}, el('a', { href: all ? '#/' : '#/all', id: 'all-tenants' },
    all ? 'Show my projects and my teams\' only' : 'Show every tenant\'s projects')) : null;
  show(el('h1', {}, all ? 'Projects of every tenant' : 'Projects'), filter, el('div', { class: 'card' }, rows.length
    ? table({}, ['Name', 'Owner', 'Description', 'Updated'], rows)
    : el('p', { class: 'muted' }, 'No projects yet: `botbox push` in a bot folder makes one.')));
}

function nextVersion(versions) {
  const parse = (v) => (String(v).match(/^(\d+)\.(\d+)\.(\d+)$/) || []).slice(1).map(Number);
  let best = [0, 0, 0];
  for (const v of versions) {
    const p = parse(v);
    if (p.length === 3 && (p[0] > best[0] || (p[0] === best[0] && (p[1] > best[1] || (p[1] === best[1] && p[2] > best[2]))))) best = p;
  }
  return `${best[0]}.${best[1]}.${best[2] + 1}`;
}

/** A rate (a fraction) as a percentage with one decimal: `4.2 %`. */
export function pct(rate) { return `${(Number(rate) * 100 || 0).toFixed(1)} %`; }

/** The deploy dialog: which environment, which CMS revision goes with the bot revision (the
 *  latest unless another is picked), and whether the environment moves to it or runs it as a
 *  canary for a share of its users (offered for an existing environment without a running
 *  canary). Deploys as the next deployment version. */
function deployDialog(pid, rev, envs, deps, cmsRevs, access) {
  const P = `/projects/${enc(pid)}`;
  const version = nextVersion(deps.map((d) => d.version));
  const envOf = (name) => envs.find((e) => e.name === name || e.slug === name);
  const envList = el('datalist', { id: 'deploy-envs' }, envs.map((e) => el('option', { value: e.name })));
  const target = el('input', { id: 'deploy-env', list: 'deploy-envs', required: true, value: (envs[0] && envs[0].name) || 'production' });
  const cms = cmsRevs.length
    ? el('select', { id: 'deploy-cms' }, cmsRevs.map((r, i) => el('option', { value: r.revision }, `${cmsLabel(r)}${i === 0 ? ' (latest)' : ''}`)))
    : null;
  // Move the environment, or run the version as a canary beside the one it runs.
  const move = el('input', { type: 'radio', name: 'deploy-how', id: 'deploy-move', value: 'move', checked: true });
  const asCanary = el('input', { type: 'radio', name: 'deploy-how', id: 'deploy-as-canary', value: 'canary' });
  const share = el('input', { id: 'deploy-share', type: 'number', min: 1, max: 99, step: 1, value: 10, required: true, disabled: true });
  const how = el('fieldset', { id: 'deploy-how' }, el('legend', {}, 'Rollout'),
    el('div', { class: 'choice' }, move, el('label', { for: 'deploy-move' }, 'Move the environment')),
    el('div', { class: 'choice' }, asCanary, el('label', { for: 'deploy-as-canary' }, 'Run as a canary for'), share,
      el('label', { for: 'deploy-share' }, el('span', { class: 'visually-hidden' }, 'Canary share, in '), '% of its users')));
  const busy = el('p', { class: 'muted', id: 'deploy-how-note', hidden: true });
  // The choice is offered for an existing environment without a running canary.
  const sync = () => {
    const env = envOf(target.value.trim());
    const offered = Boolean(env && !env.canary);
    how.hidden = !offered;
    how.disabled = !offered;
    share.disabled = !asCanary.checked;
    busy.hidden = !(env && env.canary);
    busy.textContent = env && env.canary ? `${env.name} runs a canary of ${env.canary.depVersion}: promote or abort it to deploy another as a canary.` : '';
  };
  target.addEventListener('input', sync);
  move.addEventListener('change', sync);
  asCanary.addEventListener('change', sync);
  const err = el('p', { class: 'error', role: 'alert' });
  const dialog = el('dialog', { id: 'deploy-dialog', 'aria-labelledby': 'deploy-title' });
  // Once the deployment version is made, a retry does not make it again, and the page is
  // drawn again on closing (its Deployments list it).
  let made = false;
  let done = false;
  const close = () => dialog.close();
  dialog.addEventListener('close', () => {
    dialog.remove();
    if (made && !done) project(pid, { text: `Made deployment ${version}; no environment was changed.` }).catch((e) => say(String(e.message || e), 'error'));
  });
  const form = el('form', { method: 'dialog', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const name = target.value.trim();
    const env = envOf(name);
    const canary = Boolean(env && !env.canary && asCanary.checked);
    const n = Number(share.value);
    if (canary && (!Number.isInteger(n) || n < 1 || n > 99)) { err.textContent = 'The share is a whole number from 1 to 99.'; return; }
    let what = 'deploy';
    try {
      if (!made) {
        await api('POST', `${P}/deployment/versions`, { version, botRevision: rev.revision, ...(cms ? { cmsRevision: cms.value } : {}) });
        made = true;
        if (cms) cms.disabled = true;
      }
      what = canary ? 'start a canary' : 'deploy';
      if (canary) await api('PUT', `${P}/environments/${enc(env.id)}/canary`, { depVersion: version, share: n });
      else if (env) await api('PUT', `${P}/environments/${enc(env.id)}`, { depVersion: version });
      else await api('POST', `${P}/environments`, { depId: pid, depVersion: version, name });
      done = true;
      close();
      if (canary) {
        await project(pid, { env: env.id, text: `Deployed ${version} as a canary for ${n} % of ${env.name}'s users.` });
      } else {
        await project(pid);
        say(`Deployed bot ${rev.version} as deployment ${version} to ${name}.`);
      }
    } catch (e) {
      const why = await refusal(e, what, pid, access);
      if (done) say(why, 'error');
      else if (made) err.textContent = `Made deployment ${version}, but ${canary ? 'the canary did not start' : env ? `${name} did not move to it` : `environment ${name} was not made`}: ${why}`;
      else err.textContent = why;
    }
  } },
  el('h2', { id: 'deploy-title' }, `Deploy bot ${rev.version} as deployment ${version}`),
  el('label', { for: 'deploy-env' }, 'Environment (a new name makes a new environment)'), target, envList,
  cms ? [el('label', { for: 'deploy-cms' }, 'CMS revision'), cms] : null,
  how, busy,
  err,
  el('p', { class: 'buttons' }, el('button', { type: 'button', onclick: close }, 'Cancel'),
    el('button', { type: 'submit', class: 'primary', id: 'deploy-confirm' }, 'Deploy')));
  dialog.append(form);
  document.body.append(dialog);
  sync();
  dialog.showModal();
  target.focus();
}

/** The canary dialog of environment `env`: which deployment version, for what share of its
 *  users, and when it rolls itself back (in percent here, fractions in the API). */
function canaryDialog(pid, env, deps, access) {
  const current = env.deploymentVersion || env.depVersion;
  const version = el('select', { id: 'canary-version', required: true },
    deps.filter((d) => d.version !== current).map((d) => el('option', { value: d.version }, d.deployedBy ? `${d.version} (deployed by ${d.deployedBy})` : d.version)));
  const num = (id, value, attrs) => el('input', { id, type: 'number', value, required: true, ...attrs });
  const share = num('canary-share', 10, { min: 1, max: 99, step: 1 });
  const maxError = num('canary-max-error', 5, { min: 0, max: 100, step: 0.1 });
  const maxFallback = num('canary-max-fallback', 10, { min: 0, max: 100, step: 0.1 });
  const minMessages = num('canary-min-messages', 50, { min: 0, step: 1 });
  const field = (input, label) => el('div', {}, el('label', { for: input.id }, label), input);
  const err = el('p', { class: 'error', role: 'alert' });
  const dialog = el('dialog', { id: 'canary-dialog', 'aria-labelledby': 'canary-title' });
  const close = () => dialog.close();
  dialog.addEventListener('close', () => dialog.remove());
  const form = el('form', { method: 'dialog', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const n = Number(share.value);
    if (!Number.isInteger(n) || n < 1 || n > 99) { err.textContent = 'The share is a whole number from 1 to 99.'; return; }
    const body = { depVersion: version.value, share: n,
      rollback: { maxErrorRate: Number(maxError.value) / 100, maxFallbackIncrease: Number(maxFallback.value) / 100, minMessages: Number(minMessages.value) } };
    try {
      await api('PUT', `/projects/${enc(pid)}/environments/${enc(env.id)}/canary`, body);
      close();
      await project(pid, { env: env.id, text: `Started the canary: ${body.depVersion} for ${n} % of ${env.name}'s users, ${current} for the rest.` });
    } catch (e) { err.textContent = await refusal(e, 'start a canary', pid, access); }
  } },
  el('h2', { id: 'canary-title' }, `Start a canary in ${env.name}`),
  el('p', { class: 'muted' }, `Some of the environment's users get another deployment version; the others stay on ${current}.`),
  field(version, 'Deployment version'),
  field(share, 'Share of users (%)'),
  el('fieldset', {}, el('legend', {}, 'Automatic rollback'),
    el('div', { class: 'fields' }, field(minMessages, 'Once it has served (messages)'),
      field(maxError, 'if its error rate is over (%)'),
      field(maxFallback, 'or its fallback rate is above the rest\'s by (points)'))),
  err,
  el('p', { class: 'buttons' }, el('button', { type: 'button', onclick: close }, 'Cancel'),
    el('button', { type: 'submit', class: 'primary', id: 'canary-confirm' }, 'Start canary')));
  dialog.append(form);
  document.body.append(dialog);
  dialog.showModal();
  version.focus();
}

/** A running canary: the split, both versions' figures, who started it, when it rolls
 *  itself back; Promote and Abort for those who deploy. */
function canaryPanel(e, c, current, actions) {
  const control = c.control || {};
  const side = (version, label, share, s) => el('tr', {},
    el('td', {}, version, ' ', el('span', { class: 'muted' }, label)), el('td', {}, `${share} %`),
    el('td', {}, String(s.messages ?? 0)), el('td', {}, pct(s.errorRate)), el('td', {}, pct(s.fallbackRate)));
  const r = c.rollback || {};
  return el('div', { class: 'canary', 'data-canary': c.depVersion },
    el('h4', {}, `Canary ${c.depVersion}`),
    table({ class: 'canary-figures' }, ['Version', 'Users', 'Messages', 'Error rate', 'Fallback rate'],
      [side(c.depVersion, 'canary', c.share, c), side(control.depVersion || current, 'the rest', 100 - c.share, control)]),
    el('p', { class: 'muted' }, `Started by ${c.startedBy || 'unknown'} on ${time(c.startedAt)}. `,
      r.minMessages !== undefined ? `Once it has served ${r.minMessages} messages it rolls itself back if its error rate is over ${pct(r.maxErrorRate)} or its fallback rate is above the rest's by more than ${(Number(r.maxFallbackIncrease) * 100 || 0).toFixed(1)} points.` : ''),
    actions ? el('p', { class: 'actions' },
      el('button', { type: 'button', class: 'primary promote', onclick: () => actions.end(e, true) }, 'Promote'),
      el('button', { type: 'button', class: 'abort', onclick: () => actions.end(e, false) }, 'Abort')) : null);
}

/** How the environment's last canary ended. */
function lastCanaryLine(l) {
  return el('p', { class: 'last-canary' }, `Last canary: ${l.depVersion} ${l.outcome}`, l.endedBy ? ` by ${l.endedBy}` : '',
    l.endedAt ? ` on ${time(l.endedAt)}` : '', l.reason ? `: ${l.reason}` : '', '.');
}

/** A team's members with their roles, for those who manage them: set a role, remove one,
 *  add one by user name. */
function membersCard(pid, team, access) {
  const T = `/teams/${enc(team.id)}/users`;
  const list = el('div', {}, el('p', { class: 'muted' }, 'Loading the members…'));
  const result = el('p', { class: 'result', role: 'status', hidden: true });
  const what = 'manage the team\'s members';
  const roles = ['teamAdmin', 'developer', 'viewer'];
  const roleSelect = (attrs, value) => el('select', attrs, roles.map((r) => el('option', { value: r, selected: r === value }, r)));
  const act = async (fn, done) => {
    try { await fn(); await refresh(); tell(result, done); return true; } catch (e) { tell(result, await refusal(e, what, pid, access), 'error'); return false; }
  };
  const refresh = async () => {
    const users = await api('GET', T);
    list.replaceChildren(table({ id: 'members' }, ['Member', 'Role', ''], users.map((u) => {
      const role = roleSelect({ 'aria-label': `Role of ${u.username}`, class: 'member-role' }, u.roleId);
      return el('tr', { 'data-member': u.username }, el('td', {}, u.username), el('td', {}, role),
        el('td', {}, el('span', { class: 'actions' },
          el('button', { type: 'button', class: 'set-role', onclick: () => act(() => api('POST', `${T}/${enc(u.userId)}`, { role: role.value }), `${u.username} is ${role.value} now.`) }, 'Set role'),
          el('button', { type: 'button', class: 'remove-member', onclick: () => {
            if (confirm(`Remove ${u.username} from team ${team.name}? Their team tokens stop working.`)) act(() => api('DELETE', `${T}/${enc(u.userId)}`), `Removed ${u.username}.`);
          } }, 'Remove'))));
    })));
  };
  const name = el('input', { id: 'member-name', required: true, autocomplete: 'off' });
  const role = roleSelect({ id: 'member-role' }, 'developer');
  refresh().catch((e) => list.replaceChildren(el('p', { class: 'error' }, failure(e, 'list the team\'s members', access))));
  return el('div', { class: 'card', id: 'team-members' }, el('h2', {}, `Members of team ${team.name}`), list,
    el('form', { class: 'member-add', onsubmit: (ev) => {
      ev.preventDefault();
      const who = name.value.trim();
      if (who) act(() => api('POST', `${T}/${enc(who)}`, { role: role.value }), `Added ${who} as ${role.value}.`).then((ok) => { if (ok) name.value = ''; });
    } }, el('div', { class: 'fields' }, el('div', {}, el('label', { for: 'member-name' }, 'User name'), name),
      el('div', {}, el('label', { for: 'member-role' }, 'Role'), role)),
    el('p', {}, el('button', { type: 'submit', id: 'member-add' }, 'Add member'))),
    result);
}

/** A project's page. `after`: what an action on it did, said beside that control once the
 *  page is drawn again ({env, text, kind}: in that environment's card). */
export async function project(pid, after) {
  // One request for the whole page (and one for a team's members, to those who manage them).
  const o = await api('GET', `/projects/${enc(pid)}/overview`);
  rememberAccess(pid, o.access);
  const access = o.access || null;
  const [mayEdit, mayDeploy] = [can(access, 'edit'), can(access, 'deploy')];
  const P = `/projects/${enc(pid)}`;
  const p = o.project;
  const [revs, envs, deps, cmsRevs] = [o.botRevisions, o.environments, o.deployments, o.cmsRevisions].map((data) => ({ data: data || [] }));
  const channels = envs.data.map((e) => e.channels || []);
  const deploy = (rev) => deployDialog(pid, rev, envs.data, deps.data, cmsRevs.data, access);
  // A revision is replayed on an environment's conversations by those who may edit.
  const replayOn = mayEdit ? replayEnvironment(envs.data) : null;
  const revActions = mayDeploy || replayOn;
  const warnings = (r) => {
    const w = r.warnings || [];
    return w.length
      ? el('details', { class: 'warnings' }, el('summary', {}, `${w.length} warning${w.length > 1 ? 's' : ''}`), el('ul', {}, w.map((t) => el('li', {}, t))))
      : el('span', { class: 'muted' }, 'none');
  };
  // The empty revision a project starts with (0.0.0) is not offered: there is nothing to run.
  const pushed = revs.data.filter((r) => r.version !== '0.0.0');
  const revRows = pushed.map((r) => el('tr', {},
    el('td', {}, r.version), el('td', { class: 'muted' }, time(r.createdAt)), el('td', { class: 'who' }, r.pushedBy || ''),
    el('td', { class: 'mono' }, String(r.revision || '').slice(0, 10), ' ', copyButton(r.revision, 'revision id')), el('td', {}, warnings(r)),
    revActions ? el('td', {}, el('span', { class: 'actions' },
      mayDeploy ? el('button', { type: 'button', class: 'deploy', 'data-version': r.version, onclick: () => deploy(r) }, 'Deploy…') : null,
      replayOn ? el('button', { type: 'button', class: 'replay', 'data-version': r.version, onclick: () => replayDialog(pid, r, envs.data, access) },
        `Replay against ${replayOn.name}…`) : null)) : null));
  const envLink = (e, what, label) => el('a', { href: `#/p/${enc(pid)}/${what}/${enc(e.name)}`, class: `${what}-link` }, label);
  const resultOf = (e) => document.querySelector(`[data-result-for="${CSS.escape(e.id)}"]`);
  const actions = mayDeploy ? {
    end: async (e, promote) => {
      const c = e.canary;
      const current = e.deploymentVersion || e.depVersion;
      if (!confirm(promote ? `Promote ${c.depVersion}? Every user of ${e.name} gets it.` : `Abort the canary ${c.depVersion}? Its users go back to ${current}.`)) return;
      try {
        const env = await api(promote ? 'POST' : 'DELETE', `${P}/environments/${enc(e.id)}/canary${promote ? '/promote' : ''}`);
        const now = (env && (env.deploymentVersion || env.depVersion)) || (promote ? c.depVersion : current);
        await project(pid, { env: e.id, text: promote ? `Promoted ${c.depVersion}: every user of ${e.name} runs it now.`
          : `Aborted the canary: every user of ${e.name} runs ${now} again.` });
      } catch (err) { tell(resultOf(e), await refusal(err, promote ? 'promote a canary' : 'abort a canary', pid, access), 'error'); }
    },
  } : null;
  const envCard = (e, i) => {
    const current = e.deploymentVersion || e.depVersion || '';
    const others = deps.data.filter((d) => d.version !== current);
    const links = [mayEdit ? envLink(e, 'chat', 'Chat') : null, envLink(e, 'transcripts', 'Transcripts'),
      envLink(e, 'misunderstood', 'Misunderstood'), envLink(e, 'analytics', 'Analytics'), envLink(e, 'keys', 'Keys')].filter(Boolean);
    return el('section', { class: 'env', 'data-env': e.name, 'aria-labelledby': `env-${i}` },
      el('h3', { id: `env-${i}` }, e.name),
      el('p', { class: 'env-runs' }, e.canary ? ['Runs ', el('span', { class: 'split' }, `${e.canary.depVersion} for ${e.canary.share} % of users, ${current} for the rest`)]
        : ['Runs deployment ', el('span', { class: 'env-version' }, current)]),
      el('p', { class: 'links' }, links.flatMap((l, j) => (j ? [' · ', l] : [l]))),
      (channels[i] || []).map((c) => el('div', { class: 'muted channel' }, `${c.name} (${c.type}) · webhook `, el('span', { class: 'mono' }, c.webhook), ' ', copyButton(c.webhook, 'webhook URL'))),
      e.canary ? canaryPanel(e, e.canary, current, actions) : null,
      !e.canary && e.lastCanary ? lastCanaryLine(e.lastCanary) : null,
      !e.canary && mayDeploy ? (others.length
        ? el('p', {}, el('button', { type: 'button', class: 'start-canary', onclick: () => canaryDialog(pid, e, deps.data, access) }, 'Start canary…'))
        : el('p', { class: 'muted' }, 'A canary runs another deployment version: deploy one to another environment first.')) : null,
      el('p', { class: 'result', role: 'status', 'data-result-for': e.id, hidden: true }));
  };
  const rollback = async (d) => {
    if (!confirm(`Roll back to deployment ${d.version}? Every environment on a newer version moves to it.`)) return;
    try {
      const r = await api('POST', `/deployments/${enc(d.id)}/rollback`, { version: d.version, changelog: 'from the console' });
      await project(pid);
      say(r.environments.length ? `Rolled back ${r.environments.join(', ')} to ${d.version}.` : `Nothing was newer than ${d.version}.`);
    } catch (e) { say(e.status === 403 ? await refusal(e, 'roll back deployments', pid, access) : `The rollback failed: ${e.message}`, 'error'); }
  };
  // Where each deployment runs (or is a canary): no rollback is offered to those.
  const where = (d) => [
    ...envs.data.filter((e) => (e.deploymentVersion || e.depVersion) === d.version).map((e) => `runs in ${e.name}`),
    ...envs.data.filter((e) => e.canary && e.canary.depVersion === d.version).map((e) => `canary in ${e.name} (${e.canary.share} %)`)];
  // Deployments are listed newest first: one older than a version an environment runs is
  // rolled back to; one newer than all of them is deployed to an environment.
  const runningAt = deps.data.map((d) => envs.data.some((e) => (e.deploymentVersion || e.depVersion) === d.version));
  const olderThanRunning = (i) => runningAt.slice(0, i).some(Boolean);
  const deployTo = async (d, envId) => {
    const e = envs.data.find((x) => x.id === envId);
    try {
      await api('PUT', `${P}/environments/${enc(envId)}`, { depVersion: d.version });
      await project(pid, { env: envId, text: `Deployed ${d.version} to ${e ? e.name : 'the environment'}.` });
    } catch (err) { say(err.status === 403 ? await refusal(err, 'deploy', pid, access) : `The deploy failed: ${err.message}`, 'error'); }
  };
  const deployControl = (d) => {
    if (!envs.data.length) return null;
    const pick = el('select', { class: 'deploy-to', 'aria-label': `Environment to deploy ${d.version} to` },
      envs.data.map((e) => el('option', { value: e.id }, e.name)));
    return el('span', { class: 'actions' }, pick,
      el('button', { type: 'button', class: 'deploy-version', 'data-version': d.version, onclick: () => deployTo(d, pick.value) }, 'Deploy'));
  };
  const depAction = (d, i) => {
    if (where(d).length) return el('span', { class: 'muted' }, where(d).join(', '));
    if (!mayDeploy) return null;
    return olderThanRunning(i)
      ? el('button', { type: 'button', class: 'rollback', 'data-version': d.version, onclick: () => rollback(d) }, 'Roll back to this')
      : deployControl(d);
  };
  const depRows = deps.data.map((d, i) => el('tr', {}, el('td', {}, d.version), el('td', { class: 'muted mono' }, String(d.botRevision || '').slice(0, 10)),
    el('td', { class: 'muted mono' }, String(d.cmsRevision || '').slice(0, 10)), el('td', { class: 'who' }, d.deployedBy || ''),
    el('td', {}, depAction(d, i))));
  const team = p.owner && p.owner.type === 'team' && can(access, 'members') && access ? p.owner : null;
  const link = (page, id, label) => el('a', { href: `#/p/${enc(pid)}/${page}`, id }, label);
  show(after ? IN_PLACE : null,
    el('h1', {}, p.name),
    mayEdit || mayDeploy ? null : readOnlyNote(access),
    p.owner ? el('p', { class: 'muted', id: 'owner' }, `Owned by ${p.owner.type} ${p.owner.name}`) : null,
    el('nav', { class: 'links', 'aria-label': 'Project' }, link('errors', 'errors-link', 'Errors'), ' · ',
      link('cases', 'cases-link', 'Cases and reviews'), ' · ', link('bot', 'bot-link', 'Bot source'), ' · ',
      link('nl', 'nl-link', 'NL Studio'), ' · ', link('cms', 'cms-link', 'CMS'), ' · ',
      link('activity', 'project-activity-link', 'Activity')),
    el('div', { class: 'card', id: 'environments' }, el('h2', {}, 'Environments'), envs.data.length
      ? envs.data.map(envCard)
      : el('p', { class: 'muted' }, 'No environment yet: deploy a revision.')),
    el('div', { class: 'card' }, el('h2', {}, 'Bot revisions'),
      revRows.length && mayEdit ? el('p', {}, el('a', { href: `#/p/${enc(pid)}/chat` }, 'Chat with the latest revision')) : null,
      revRows.length
      ? table({ id: 'revisions' }, ['Version', 'Pushed', 'Pushed by', 'Revision', 'Warnings', ...(revActions ? [''] : [])], revRows)
      : el('p', { class: 'muted' }, 'Nothing pushed yet: `botbox push` in the bot\'s folder makes the first revision.')),
    el('div', { class: 'card' }, el('h2', {}, 'Deployments'), depRows.length
      ? table({ id: 'deployments' }, ['Version', 'Bot revision', 'CMS revision', 'Deployed by', ''], depRows)
      : el('p', { class: 'muted' }, 'No deployment yet.')),
    team ? membersCard(pid, team, access) : null);
  if (after) tell(after.env ? resultOf({ id: after.env }) : null, after.text, after.kind);
}
