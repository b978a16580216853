// Projects: the list with owners, a project's page (environments, revisions, deployments),
// the deploy dialog and rollbacks.
import { api, copyButton, el, enc, say, show, table, time } from './lib.js';
import { cmsLabel } from './cms.js';

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

/** The deploy dialog: which environment, and which CMS revision goes with the bot revision
 *  (the latest unless another is picked). Deploys as the next deployment version. */
function deployDialog(pid, rev, envs, deps, cmsRevs) {
  const P = `/projects/${enc(pid)}`;
  const version = nextVersion(deps.map((d) => d.version));
  const envList = el('datalist', { id: 'deploy-envs' }, envs.map((e) => el('option', { value: e.name })));
  const target = el('input', { id: 'deploy-env', list: 'deploy-envs', required: true, value: (envs[0] && envs[0].name) || 'production' });
  const cms = cmsRevs.length
    ? el('select', { id: 'deploy-cms' }, cmsRevs.map((r, i) => el('option', { value: r.revision }, `${cmsLabel(r)}${i === 0 ? ' (latest)' : ''}`)))
    : null;
  const err = el('p', { class: 'error', role: 'alert' });
  const dialog = el('dialog', { id: 'deploy-dialog', 'aria-labelledby': 'deploy-title' });
  const close = () => { dialog.close(); dialog.remove(); };
  const form = el('form', { method: 'dialog', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const name = target.value.trim();
    const env = envs.find((e) => e.name === name || e.slug === name);
    try {
      await api('POST', `${P}/deployment/versions`, { version, botRevision: rev.revision, ...(cms ? { cmsRevision: cms.value } : {}) });
      if (env) await api('PUT', `${P}/environments/${enc(env.id)}`, { depVersion: version });
      else await api('POST', `${P}/environments`, { depId: pid, depVersion: version, name });
      close();
      await project(pid);
      say(`Deployed bot ${rev.version} as deployment ${version} to ${name}.`);
    } catch (e) { err.textContent = e.message; }
  } },
  el('h2', { id: 'deploy-title' }, `Deploy bot ${rev.version} as deployment ${version}`),
  el('label', { for: 'deploy-env' }, 'Environment (a new name makes a new environment)'), target, envList,
  cms ? [el('label', { for: 'deploy-cms' }, 'CMS revision'), cms] : null,
  err,
  el('p', { class: 'buttons' }, el('button', { type: 'button', onclick: close }, 'Cancel'),
    el('button', { type: 'submit', class: 'primary', id: 'deploy-confirm' }, 'Deploy')));
  dialog.append(form);
  document.body.append(dialog);
  dialog.showModal();
  target.focus();
}

export async function project(pid) {
  // One request for the whole page.
  const o = await api('GET', `/projects/${enc(pid)}/overview`);
  const p = o.project;
  const [revs, envs, deps, cmsRevs] = [o.botRevisions, o.environments, o.deployments, o.cmsRevisions].map((data) => ({ data }));
  const channels = envs.data.map((e) => e.channels || []);
  const deploy = (rev) => deployDialog(pid, rev, envs.data, deps.data, cmsRevs.data);
  const warnings = (r) => {
    const w = r.warnings || [];
    return w.length
      ? el('details', { class: 'warnings' }, el('summary', {}, `${w.length} warning${w.length > 1 ? 's' : ''}`), el('ul', {}, w.map((t) => el('li', {}, t))))
      : el('span', { class: 'muted' }, 'none');
  };
  // The empty revision a project starts with (0.0.0) is not offered: there is nothing to run.
  const pushed = revs.data.filter((r) => r.version !== '0.0.0');
  const revRows = pushed.map((r) => el('tr', {},
    el('td', {}, r.version), el('td', { class: 'muted' }, time(r.createdAt)),
    el('td', { class: 'mono' }, String(r.revision || '').slice(0, 10), ' ', copyButton(r.revision, 'revision id')), el('td', {}, warnings(r)),
    el('td', {}, el('button', { type: 'button', class: 'deploy', 'data-version': r.version, onclick: () => deploy(r) }, 'Deploy…'))));
  const envLink = (e, what, label) => el('a', { href: `#/p/${enc(pid)}/${what}/${enc(e.name)}`, class: `${what}-link` }, label);
  const envRows = envs.data.map((e, i) => el('tr', {},
    el('td', {}, e.name,
      (channels[i] || []).map((c) => el('div', { class: 'muted channel' }, `${c.name} (${c.type}) · webhook `, el('span', { class: 'mono' }, c.webhook), ' ', copyButton(c.webhook, 'webhook URL')))),
    el('td', {}, e.deploymentVersion || e.depVersion || ''),
    el('td', { class: 'links' }, envLink(e, 'chat', 'Chat'), ' · ', envLink(e, 'transcripts', 'Transcripts'), ' · ',
      envLink(e, 'analytics', 'Analytics'), ' · ', envLink(e, 'keys', 'Keys'))));
  const rollback = async (d) => {
    if (!confirm(`Roll back to deployment ${d.version}? Every environment on a newer version moves to it.`)) return;
    try {
      const r = await api('POST', `/deployments/${enc(d.id)}/rollback`, { version: d.version, changelog: 'from the console' });
      await project(pid);
      say(r.environments.length ? `Rolled back ${r.environments.join(', ')} to ${d.version}.` : `Nothing was newer than ${d.version}.`);
    } catch (e) { say(`The rollback failed: ${e.message}`, 'error'); }
  };
  // Where each deployment runs: no rollback is offered to the one an environment runs.
  const runs = (d) => envs.data.filter((e) => (e.deploymentVersion || e.depVersion) === d.version).map((e) => e.name);
  const depRows = deps.data.map((d) => el('tr', {}, el('td', {}, d.version), el('td', { class: 'muted' }, String(d.botRevision || '').slice(0, 10)),
    el('td', { class: 'muted' }, String(d.cmsRevision || '').slice(0, 10)),
    el('td', {}, runs(d).length ? el('span', { class: 'muted' }, `runs in ${runs(d).join(', ')}`)
      : el('button', { type: 'button', class: 'rollback', 'data-version': d.version, onclick: () => rollback(d) }, 'Roll back to this'))));
  show(
    el('h1', {}, p.name),
    p.owner ? el('p', { class: 'muted', id: 'owner' }, `Owned by ${p.owner.type} ${p.owner.name}`) : null,
    el('p', { class: 'links' }, el('a', { href: `#/p/${enc(pid)}/errors`, id: 'errors-link' }, 'Errors'), ' · ',
      el('a', { href: `#/p/${enc(pid)}/cases`, id: 'cases-link' }, 'Cases and reviews'), ' · ',
      el('a', { href: `#/p/${enc(pid)}/bot`, id: 'bot-link' }, 'Bot source'), ' · ',
      el('a', { href: `#/p/${enc(pid)}/nl`, id: 'nl-link' }, 'NL Studio'), ' · ',
      el('a', { href: `#/p/${enc(pid)}/cms`, id: 'cms-link' }, 'CMS')),
    el('div', { class: 'card' }, el('h2', {}, 'Environments'), envRows.length
      ? table({ id: 'environments' }, ['Environment', 'Deployment', ''], envRows)
      : el('p', { class: 'muted' }, 'No environment yet: deploy a revision.')),
    el('div', { class: 'card' }, el('h2', {}, 'Bot revisions'),
      revRows.length ? el('p', {}, el('a', { href: `#/p/${enc(pid)}/chat` }, 'Chat with the latest revision')) : null,
      revRows.length
      ? table({ id: 'revisions' }, ['Version', 'Pushed', 'Revision', 'Warnings', ''], revRows)
      : el('p', { class: 'muted' }, 'Nothing pushed yet: `botbox push` in the bot\'s folder makes the first revision.')),
    el('div', { class: 'card' }, el('h2', {}, 'Deployments'), depRows.length
      ? table({}, ['Version', 'Bot revision', 'CMS revision', ''], depRows)
      : el('p', { class: 'muted' }, 'No deployment yet.')));
}
