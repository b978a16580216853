// The console's entry: a router from the URL's hash to one page module each. The header
// (who is signed in, teams) is loaded once per sign-in or team switch, not per page.
import { ApiError, TOKEN, errorBox, forgetAccess, say, show } from './lib.js';
import { header, signIn } from './signin.js';
import { project, projects } from './projects.js';
import { chat } from './chat.js';
import { transcripts } from './transcripts.js';
import { errorsView } from './errors.js';
import { keys } from './keys.js';
import { cases } from './cases.js';
import { analyticsView } from './analytics.js';
import { botSource } from './bot.js';
import { nlStudio } from './nl.js';
import { cmsView } from './cms.js';
import { activity } from './activity.js';
import { misunderstood, replayView } from './learning.js';

/** `#/p/<project>/<page>/<args…>` pages, by page name. */
const PROJECT_PAGES = {
  chat: (pid, env) => chat(pid, env),
  transcripts: (pid, env, who, at) => transcripts(pid, env, who, at),
  keys: (pid, env) => keys(pid, env, me),
  errors: (pid) => errorsView(pid),
  cases: (pid) => cases(pid),
  analytics: (pid, env) => analyticsView(pid, env),
  bot: (pid) => botSource(pid),
  nl: (pid, name) => nlStudio(pid, name),
  cms: (pid) => cmsView(pid),
  activity: (pid) => activity(pid, me),
  misunderstood: (pid, env) => misunderstood(pid, env),
  replay: (pid, id) => replayView(pid, id),
};

let me = null;

async function route() {
  if (!sessionStorage.getItem(TOKEN)) { me = null; signIn(); return; }
  say(''); // what the last page said is not about this one
  try {
    if (!me) me = await header();
    let [first, pid, page, ...args] = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    if (first === 'projects' && pid) first = 'p';
    if (first === 'keys') await keys(null, null, me);
    else if (first === 'activity') await activity(null, me);
    else if (first === 'p' && PROJECT_PAGES[page]) await PROJECT_PAGES[page](pid, ...args);
    else if (first === 'p' && pid) await project(pid);
    else await projects(me, first === 'all');
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) show(errorBox(e));
  }
}

window.addEventListener('hashchange', route);
// Signed in or acting for another team: the header is loaded again at the next route.
window.addEventListener('botbox:reset', () => { me = null; forgetAccess(); });
window.addEventListener('botbox:navigate', route);
window.addEventListener('botbox:signed-out', (ev) => { me = null; forgetAccess(); signIn(ev.detail); });
route();
