//! Sandbox benchmark: prints step latency native vs sandbox (pizza bot), the cost of a
//! JavaScript method call, cold start of a new revision, and instances per GB.
//!
//! Run: `cargo build --release -p botbox -p botbox-bench && target/release/sandbox-bench`

use botbox_sandbox::block_on;
use botbox_sandbox::effects::Effects;
use botbox_sandbox::limits::Limits;
use botbox_sandbox::{RawOutcome, Revision, Sandbox, SandboxConfig, SessionJson, StepOutcome};
use botbox_testkit::StubEffects;
use runtime_core::testing::{OfflineHost, fresh_session};
use runtime_core::{CompiledBot, Message, Session, compile_source, converse};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TENANT: &str = "bench";

fn pizza_messages() -> Vec<Message> {
    vec![
        Message::text("I want pizza"),
        Message::data(json!({"type": "pizza", "pizza": "pepperoni"})),
        Message::text("2"),
        Message::data(json!({"type": "confirm", "confirm": "yes"})),
    ]
}

/// Median of `runs` timings of `f`, in microseconds.
fn median_us(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[runs / 2].as_secs_f64() * 1e6
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// A bot from its YAML source.
fn compile(source: &str) -> anyhow::Result<CompiledBot> {
    Ok(compile_source(source)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .bot)
}

/// Median of `v`, which is not empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median of `d`, which is not empty, in milliseconds.
fn median_ms(d: &mut [Duration]) -> f64 {
    d.sort();
    d[d.len() / 2].as_secs_f64() * 1e3
}

/// A number of profiling runs from the environment: set, only those runs happen (for perf).
fn profile_runs<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|n| n.parse().ok())
}

/// The bench's sandbox: 256 slots, 4 warm instances per revision, artifacts cached.
fn sandbox_config() -> SandboxConfig {
    SandboxConfig {
        limits: Limits::default(),
        slots: 256,
        warm_per_revision: 4,
        cache_dir: std::env::temp_dir().join("botbox-bench-cache"),
        // `BOTBOX_PERFMAP=1 perf record target/release/sandbox-bench` names guest functions.
        perfmap: std::env::var_os("BOTBOX_PERFMAP").is_some(),
        ..SandboxConfig::default()
    }
}

/// Starts a sandbox with its artifact cached (a first start makes sure it is); times that start.
fn start_sandbox(config: SandboxConfig) -> anyhow::Result<(Sandbox, f64)> {
    drop(Sandbox::new(config.clone())?);
    let t = Instant::now();
    let sb = Sandbox::new(config)?;
    Ok((sb, t.elapsed().as_secs_f64() * 1e3))
}

/// The sandbox under test and the pizza conversation it is measured on.
struct Bench {
    sb: Sandbox,
    effects: Arc<dyn Effects>,
    pizza: CompiledBot,
    rev: Revision,
    messages: Vec<Message>,
    /// The session before each message (and after the last), as the native runtime leaves it.
    sessions: Vec<Session>,
    /// The first session as text, as the live path stores it.
    fresh: SessionJson,
    host: OfflineHost,
}

impl Bench {
    /// Plays the pizza conversation natively for its sessions; warms its revision in the sandbox.
    fn new(sb: Sandbox, pizza: CompiledBot) -> anyhow::Result<Bench> {
        let effects: Arc<dyn Effects> = Arc::new(StubEffects::offline());
        let messages = pizza_messages();
        let mut sessions: Vec<Session> = vec![fresh_session()];
        let mut host = OfflineHost::default();
        for m in &messages {
            let r = converse(&pizza, sessions.last().unwrap(), m.clone(), &mut host).unwrap();
            sessions.push(r.session);
        }
        let rev = Revision::new("pizza", &pizza);
        block_on(sb.step(TENANT, &rev, &sessions[0], &messages[0], effects.clone())).unwrap();
        let fresh = SessionJson::new(serde_json::to_string(&sessions[0])?);
        Ok(Bench {
            sb,
            effects,
            pizza,
            rev,
            messages,
            sessions,
            fresh,
            host,
        })
    }

    /// One step of `rev` in the sandbox, `Session` values in and out.
    fn step(&self, rev: &Revision, session: &Session, m: &Message) -> StepOutcome {
        block_on(self.sb.step(TENANT, rev, session, m, self.effects.clone())).unwrap()
    }

    /// One step of `rev` in the sandbox as the live path takes it: the session as text.
    fn step_json(&self, rev: &Revision, session: &SessionJson, m: &Message) -> RawOutcome {
        block_on(
            self.sb
                .step_json(TENANT, rev, session, m, self.effects.clone()),
        )
        .unwrap()
    }

    /// The whole pizza conversation on the live path, from the first session.
    fn live_conversation(&self) {
        let mut s = self.fresh.clone();
        for m in &self.messages {
            s = self.step_json(&self.rev, &s, m).session;
        }
    }

    /// `BOTBOX_PROFILE_STEPS=n`: only `n` pizza conversations on the live path.
    fn profile_steps(&self, n: i32) {
        for _ in 0..n {
            self.live_conversation();
        }
    }

    /// Pizza step per message: native, sandbox with `Session` values, sandbox on the live path.
    ///
    /// Native and sandbox are timed in alternating rounds, so that the drift of this VM's
    /// speed (up to 1.5x between runs) hits both alike; the ratio is the median of the rounds'
    /// ratios. `step` takes and gives `Session` values (JSON both ways across the boundary,
    /// parsed on both sides), and `step_json` is what the live path does: the session as text,
    /// kept by the instance between a conversation's steps, so that only its tag crosses in
    /// and its JSON comes out to be stored.
    fn time_pizza(&mut self, runs: usize) -> PizzaTimes {
        let (mut native_t, mut value_t, mut live_t, mut ratios) = (vec![], vec![], vec![], vec![]);
        let per_message = self.messages.len() as f64;
        for _round in 0..15 {
            let n = median_us(runs / 10, || {
                for (m, s) in self.messages.iter().zip(&self.sessions) {
                    converse(&self.pizza, s, m.clone(), &mut self.host).unwrap();
                }
            }) / per_message;
            let v = median_us(runs / 10, || {
                for (m, s) in self.messages.iter().zip(&self.sessions) {
                    self.step(&self.rev, s, m);
                }
            }) / per_message;
            let x = median_us(runs / 10, || self.live_conversation()) / per_message;
            native_t.push(n);
            value_t.push(v);
            live_t.push(x);
            ratios.push((x / n, v / n));
        }
        PizzaTimes {
            native_us: median(&mut native_t),
            value_us: median(&mut value_t),
            sandbox_us: median(&mut live_t),
            ratio: median(&mut ratios.iter().map(|r| r.0).collect::<Vec<_>>()),
            value_ratio: median(&mut ratios.iter().map(|r| r.1).collect::<Vec<_>>()),
        }
    }

    /// Checks that the live path's conversation gives as many replies as native, per message.
    fn check_live_replies(&mut self) {
        let mut s = self.fresh.clone();
        for (i, m) in self.messages.iter().enumerate() {
            let out = self.step_json(&self.rev, &s, m);
            let native =
                converse(&self.pizza, &self.sessions[i], m.clone(), &mut self.host).unwrap();
            assert_eq!(
                out.report.responses.len(),
                native.responses.len(),
                "message {i}"
            );
            s = out.session;
        }
    }

    /// The fuel of the pizza conversation's first step.
    fn first_step_fuel(&self) -> u64 {
        self.step(&self.rev, &self.sessions[0], &self.messages[0])
            .fuel_used
    }

    /// Fixed cost of the boundary: a bot with one flow whose only intent never matches, so the
    /// step does no work but crossing into the guest and back (JSON in, JSON out).
    fn time_idle(&self, runs: usize) -> anyhow::Result<Idle> {
        let idle_bot = compile(
            "name: idle\nflows:\n  f:\n    intents: {a: {initial: true, condition: \"content == 'never'\"}}\n    states: {s: {initial: true}}\n",
        )?;
        let idle_rev = Revision::new("idle", &idle_bot);
        let idle_msg = Message::text("hello");
        let idle_session = fresh_session();
        let mut idle_native_host = OfflineHost::default();
        let native = median_us(runs, || {
            converse(
                &idle_bot,
                &idle_session,
                idle_msg.clone(),
                &mut idle_native_host,
            )
            .unwrap();
        });
        self.step(&idle_rev, &idle_session, &idle_msg);
        let sandbox = median_us(runs, || {
            self.step(&idle_rev, &idle_session, &idle_msg);
        });
        let fuel = self.step(&idle_rev, &idle_session, &idle_msg).fuel_used;
        Ok(Idle {
            native,
            sandbox,
            fuel,
        })
    }

    /// JavaScript: a step that calls one trivial method vs the same step without it.
    fn time_js_call(&self, js_bot: &CompiledBot) -> JsCall {
        let js_rev = Revision::new("js", js_bot);
        let s0 = fresh_session();
        let (js_msg, plain_msg) = (Message::text("js"), Message::text("plain"));
        self.step(&js_rev, &s0, &js_msg);
        let with_js = median_us(200, || {
            self.step(&js_rev, &s0, &js_msg);
        });
        let without_js = median_us(200, || {
            self.step(&js_rev, &s0, &plain_msg);
        });
        let js_fuel = self.step(&js_rev, &s0, &js_msg).fuel_used;
        JsCall {
            with_js,
            without_js,
            js_fuel,
        }
    }

    /// JavaScript on a new revision: the time includes the instance's load, which builds and
    /// locks down the context; the fuel is the step's own.
    fn time_js_cold(&self, js_bot: &CompiledBot) -> JsCold {
        let s0 = fresh_session();
        let js_msg = Message::text("js");
        let mut js_cold = vec![];
        let mut js_cold_fuel = 0;
        for i in 0..10 {
            let r = Revision::new(&format!("js-cold-{i}"), js_bot);
            let t = Instant::now();
            let out = self.step(&r, &s0, &js_msg);
            js_cold.push(t.elapsed());
            js_cold_fuel = out.fuel_used;
        }
        JsCold {
            js_cold_ms: median_ms(&mut js_cold),
            js_cold_fuel,
        }
    }

    /// The pizza pick step (message 1) of `rev` on the live path; returns its fuel.
    fn pick_step(&self, rev: &Revision, pick: &SessionJson) -> u64 {
        let out = self.step_json(rev, pick, &self.messages[1]);
        assert!(
            out.session.json.contains("pepperoni"),
            "the pick was mapped"
        );
        out.fuel_used
    }

    /// The pick step with a JavaScript mapping method against the declarative one
    /// (alternated rounds).
    fn time_pick(&self, mapped_rev: &Revision, pick: &SessionJson) -> Pick {
        let (mut plain_pick, mut mapped_pick, mut pick_ratios) = (vec![], vec![], vec![]);
        for _round in 0..15 {
            let p = median_us(40, || {
                self.pick_step(&self.rev, pick);
            });
            let m = median_us(40, || {
                self.pick_step(mapped_rev, pick);
            });
            plain_pick.push(p);
            mapped_pick.push(m);
            pick_ratios.push(m / p);
        }
        let (plain_pick_fuel, mapped_pick_fuel) = (
            self.pick_step(&self.rev, pick),
            self.pick_step(mapped_rev, pick),
        );
        Pick {
            plain_pick_us: median(&mut plain_pick),
            mapped_pick_us: median(&mut mapped_pick),
            pick_ratio: median(&mut pick_ratios),
            plain_pick_fuel,
            mapped_pick_fuel,
        }
    }

    /// Cold start: a revision never seen before, to its first answer (artifact cached).
    fn time_cold_start(&self) -> f64 {
        let mut cold = vec![];
        for i in 0..20 {
            let r = Revision::new(&format!("cold-{i}"), &self.pizza);
            let t = Instant::now();
            self.step(&r, &self.sessions[0], &self.messages[0]);
            cold.push(t.elapsed());
        }
        median_ms(&mut cold)
    }

    /// Memory: resident bytes per warm instance, with `n` distinct revisions kept alive at once.
    fn memory_per_instance(&self, n: usize) -> f64 {
        let before = rss_bytes();
        for i in 0..n {
            let r = Revision::new(&format!("mem-{i}"), &self.pizza);
            self.step(&r, &self.sessions[0], &self.messages[0]);
        }
        (rss_bytes().saturating_sub(before)) as f64 / n as f64
    }
}

/// The JavaScript bench bot: intent `js` calls one trivial method, `plain` answers the same
/// text without it.
fn js_bot() -> anyhow::Result<CompiledBot> {
    compile(
        r#"
name: js
methods:
  add(message, context, data, options, config, result): "return 'sum ' + (options.a + options.b);"
flows:
  f:
    intents:
      js: {initial: true, condition: "content == 'js'"}
      plain: {initial: true, condition: "content == 'plain'"}
    states:
      s:
        initial: true
        transitions: {m: "intent == 'js'", p: "intent == 'plain'"}
      m: {end: true, action: {name: method, method: add, options: {a: 1, b: 2}}}
      p: {end: true, action: {name: text, options: {text: "sum 3"}}}
"#,
    )
}

/// The pizza bot with its pick mapping written as a JavaScript method instead of a
/// declarative mapping.
fn mapped_pizza(source: &str) -> anyhow::Result<CompiledBot> {
    let declarative = "            mapping:\n              context.pizza: payload.pizza\n";
    anyhow::ensure!(
        source.contains(declarative),
        "the pizza bot's pick mapping moved"
    );
    let mapped_source = source
        .replace(declarative, "            mapping: pickPizza\n")
        .replace(
            "\nflows:\n",
            "\nmethods:\n  pickPizza(ctx): \"ctx.context.pizza = ctx.payload.pizza;\"\nflows:\n",
        );
    compile(&mapped_source)
}

/// Pizza step per message, native and in the sandbox.
struct PizzaTimes {
    native_us: f64,
    value_us: f64,
    sandbox_us: f64,
    ratio: f64,
    value_ratio: f64,
}

impl PizzaTimes {
    /// Prints the three lines, `fuel` being the first message's step's.
    fn print(&self, fuel: u64) {
        let PizzaTimes {
            native_us,
            value_us,
            sandbox_us,
            ratio,
            value_ratio,
        } = *self;
        println!("  pizza step, native                     {native_us:>9.1} µs / message");
        println!(
            "  pizza step, sandbox, live path         {sandbox_us:>9.1} µs / message  ({ratio:.1}x native; session kept in the instance, JSON out)"
        );
        println!(
            "  pizza step, sandbox, Session values    {value_us:>9.1} µs / message  ({value_ratio:.1}x native, {fuel} fuel for message 1)"
        );
    }
}

/// The empty step, native and in the sandbox.
struct Idle {
    native: f64,
    sandbox: f64,
    fuel: u64,
}

impl Idle {
    /// Prints its part of the report.
    fn print(&self) {
        let Idle {
            native: idle_native,
            sandbox: idle_sandbox,
            fuel: idle_fuel,
        } = *self;
        println!("  empty step (nothing matches), native     {idle_native:>9.1} µs");
        println!(
            "  empty step (nothing matches), sandbox    {idle_sandbox:>9.1} µs  ({idle_fuel} fuel: the boundary's fixed cost)"
        );
    }
}

/// A step with one JavaScript method call and without it.
struct JsCall {
    with_js: f64,
    without_js: f64,
    js_fuel: u64,
}

impl JsCall {
    /// Prints its part of the report.
    fn print(&self) {
        let JsCall {
            with_js,
            without_js,
            js_fuel,
        } = *self;
        println!("  step with one JS method call           {with_js:>9.1} µs  ({js_fuel} fuel)");
        println!(
            "  same step without JS                   {without_js:>9.1} µs  (JS call costs {:.1} µs)",
            with_js - without_js
        );
    }
}

/// The first JavaScript step of a new revision.
struct JsCold {
    js_cold_ms: f64,
    js_cold_fuel: u64,
}

impl JsCold {
    /// Prints its part of the report.
    fn print(&self) {
        let JsCold {
            js_cold_ms,
            js_cold_fuel,
        } = *self;
        println!(
            "  first JS step of a new revision        {js_cold_ms:>9.2} ms  ({js_cold_fuel} fuel in the step; the lockdown is the load's)"
        );
    }
}

/// The pick step with a JavaScript mapping against the declarative one.
struct Pick {
    plain_pick_us: f64,
    mapped_pick_us: f64,
    pick_ratio: f64,
    plain_pick_fuel: u64,
    mapped_pick_fuel: u64,
}

impl Pick {
    /// Prints its part of the report.
    fn print(&self) {
        let Pick {
            plain_pick_us,
            mapped_pick_us,
            pick_ratio,
            plain_pick_fuel,
            mapped_pick_fuel,
        } = *self;
        println!(
            "  pizza pick step, JS mapping method     {mapped_pick_us:>9.1} µs  ({pick_ratio:.2}x the declarative mapping's {plain_pick_us:.1} µs; fuel {mapped_pick_fuel} against {plain_pick_fuel})"
        );
    }
}

fn main() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let pizza_source = std::fs::read_to_string(root.join("examples/pizza/bot.yml"))?;
    let pizza = compile(&pizza_source)?;
    let (sb, start_ms) = start_sandbox(sandbox_config())?;
    let mut b = Bench::new(sb, pizza)?;
    if let Some(n) = profile_runs("BOTBOX_PROFILE_STEPS") {
        b.profile_steps(n);
        return Ok(());
    }
    let runs = 400;
    let pizza_times = b.time_pizza(runs);
    b.check_live_replies();
    let fuel = b.first_step_fuel();
    let idle = b.time_idle(runs)?;
    let js_bot = js_bot()?;
    let js_call = b.time_js_call(&js_bot);
    let js_cold = b.time_js_cold(&js_bot);

    // The pizza bot's pick step, its mapping written as a JavaScript method.
    let mapped_rev = Revision::new("pizza-mapped", &mapped_pizza(&pizza_source)?);
    let pick = SessionJson::new(serde_json::to_string(&b.sessions[1])?);
    b.pick_step(&mapped_rev, &pick);
    // `BOTBOX_PROFILE_JS=n`: only run the mapped pick step n times (for perf).
    if let Some(n) = profile_runs::<usize>("BOTBOX_PROFILE_JS") {
        for _ in 0..n {
            b.pick_step(&mapped_rev, &pick);
        }
        return Ok(());
    }
    let picks = b.time_pick(&mapped_rev, &pick);
    let cold_ms = b.time_cold_start();
    let per_instance = b.memory_per_instance(100);

    println!("sandbox benchmark (pooling allocator: {})", b.sb.pooling());
    println!("  sandbox start with cached artifact     {start_ms:>9.1} ms");
    pizza_times.print(fuel);
    idle.print();
    js_call.print();
    js_cold.print();
    picks.print();
    println!("  new revision to first answer (median)  {cold_ms:>9.2} ms");
    println!(
        "  memory per warm instance               {:>9.2} MiB  (~{:.0} instances per GB)",
        per_instance / 1048576.0,
        1e9 / per_instance.max(1.0)
    );
    Ok(())
}
