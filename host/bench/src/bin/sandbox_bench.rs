//! Sandbox benchmark: prints step latency native vs sandbox (pizza bot), the cost of a
//! JavaScript method call, cold start of a new revision, and instances per GB.
//!
//! Run: `cargo build --release -p botbox -p botbox-bench && target/release/sandbox-bench`

use botbox_sandbox::block_on;
use botbox_sandbox::effects::Effects;
use botbox_sandbox::limits::Limits;
use botbox_sandbox::{Revision, Sandbox, SandboxConfig, SessionJson};
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

fn main() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let pizza: CompiledBot = compile_source(&std::fs::read_to_string(
        root.join("examples/pizza/bot.yml"),
    )?)
    .map_err(|e| anyhow::anyhow!("{e}"))?
    .bot;
    let cache = std::env::temp_dir().join("botbox-bench-cache");
    let config = SandboxConfig {
        limits: Limits::default(),
        slots: 256,
        warm_per_revision: 4,
        cache_dir: cache.clone(),
        // `BOTBOX_PERFMAP=1 perf record target/release/sandbox-bench` names guest functions.
        perfmap: std::env::var_os("BOTBOX_PERFMAP").is_some(),
        ..SandboxConfig::default()
    };

    // Make sure the artifact is cached, then time a start with the cache warm.
    drop(Sandbox::new(config.clone())?);
    let t = Instant::now();
    let sb = Sandbox::new(config.clone())?;
    let start_ms = t.elapsed().as_secs_f64() * 1e3;
    let effects: Arc<dyn Effects> = Arc::new(StubEffects::offline());

    // Native vs sandbox, per message of the pizza conversation.
    let messages = pizza_messages();
    let mut sessions: Vec<Session> = vec![fresh_session()];
    let mut h = OfflineHost::default();
    for m in &messages {
        let r = converse(&pizza, sessions.last().unwrap(), m.clone(), &mut h).unwrap();
        sessions.push(r.session);
    }
    let rev = Revision::new("pizza", &pizza);
    block_on(sb.step(TENANT, &rev, &sessions[0], &messages[0], effects.clone())).unwrap();
    // `BOTBOX_PROFILE_STEPS=n`: only run n pizza conversations on the live path (for perf).
    if let Some(n) = std::env::var("BOTBOX_PROFILE_STEPS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        let fresh = SessionJson::new(serde_json::to_string(&sessions[0])?);
        for _ in 0..n {
            let mut s = fresh.clone();
            for m in &messages {
                s = block_on(sb.step_json(TENANT, &rev, &s, m, effects.clone()))
                    .unwrap()
                    .session;
            }
        }
        return Ok(());
    }
    // Native and sandbox timed in alternating rounds, so that the drift of this VM's speed
    // (up to 1.5x between runs) hits both alike; the ratio is the median of the rounds' ratios.
    //
    // Two ways of calling the sandbox: `step` takes and gives `Session` values (JSON both ways
    // across the boundary, parsed on both sides), and `step_json` is what the live path does:
    // the session as text, kept by the instance between a conversation's steps, so that only
    // its tag crosses in and its JSON comes out to be stored.
    let runs = 400;
    let fresh = SessionJson::new(serde_json::to_string(&sessions[0])?);
    let (mut native_t, mut value_t, mut live_t, mut ratios) = (vec![], vec![], vec![], vec![]);
    for _round in 0..15 {
        let n = median_us(runs / 10, || {
            for (m, s) in messages.iter().zip(&sessions) {
                converse(&pizza, s, m.clone(), &mut h).unwrap();
            }
        }) / messages.len() as f64;
        let v = median_us(runs / 10, || {
            for (m, s) in messages.iter().zip(&sessions) {
                block_on(sb.step(TENANT, &rev, s, m, effects.clone())).unwrap();
            }
        }) / messages.len() as f64;
        let x = median_us(runs / 10, || {
            let mut s = fresh.clone();
            for m in &messages {
                s = block_on(sb.step_json(TENANT, &rev, &s, m, effects.clone()))
                    .unwrap()
                    .session;
            }
        }) / messages.len() as f64;
        native_t.push(n);
        value_t.push(v);
        live_t.push(x);
        ratios.push((x / n, v / n));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let native_us = median(&mut native_t);
    let value_us = median(&mut value_t);
    let sandbox_us = median(&mut live_t);
    let ratio = median(&mut ratios.iter().map(|r| r.0).collect());
    let value_ratio = median(&mut ratios.iter().map(|r| r.1).collect());
    // The live path's conversation gives the same replies as native.
    {
        let mut s = fresh.clone();
        for (i, m) in messages.iter().enumerate() {
            let out = block_on(sb.step_json(TENANT, &rev, &s, m, effects.clone())).unwrap();
            let native = converse(&pizza, &sessions[i], m.clone(), &mut h).unwrap();
            assert_eq!(
                out.report.responses.len(),
                native.responses.len(),
                "message {i}"
            );
            s = out.session;
        }
    }
    let fuel = block_on(sb.step(TENANT, &rev, &sessions[0], &messages[0], effects.clone()))
        .unwrap()
        .fuel_used;

    // Fixed cost of the boundary: a bot with one flow whose only intent never matches, so the
    // step does no work but crossing into the guest and back (JSON in, JSON out).
    let idle_bot = compile_source("name: idle\nflows:\n  f:\n    intents: {a: {initial: true, condition: \"content == 'never'\"}}\n    states: {s: {initial: true}}\n")
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .bot;
    let idle_rev = Revision::new("idle", &idle_bot);
    let idle_msg = Message::text("hello");
    let idle_session = fresh_session();
    let mut idle_native_host = OfflineHost::default();
    let idle_native = median_us(runs, || {
        converse(
            &idle_bot,
            &idle_session,
            idle_msg.clone(),
            &mut idle_native_host,
        )
        .unwrap();
    });
    block_on(sb.step(TENANT, &idle_rev, &idle_session, &idle_msg, effects.clone())).unwrap();
    let idle_sandbox = median_us(runs, || {
        block_on(sb.step(TENANT, &idle_rev, &idle_session, &idle_msg, effects.clone())).unwrap();
    });
    let idle_fuel = block_on(sb.step(TENANT, &idle_rev, &idle_session, &idle_msg, effects.clone()))
        .unwrap()
        .fuel_used;

    // JavaScript: a step that calls one trivial method vs the same step without it.
    let js_bot = compile_source(
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
    .map_err(|e| anyhow::anyhow!("{e}"))?
    .bot;
    let js_rev = Revision::new("js", &js_bot);
    let s0 = fresh_session();
    let (js_msg, plain_msg) = (Message::text("js"), Message::text("plain"));
    block_on(sb.step(TENANT, &js_rev, &s0, &js_msg, effects.clone())).unwrap();
    let with_js = median_us(200, || {
        block_on(sb.step(TENANT, &js_rev, &s0, &js_msg, effects.clone())).unwrap();
    });
    let without_js = median_us(200, || {
        block_on(sb.step(TENANT, &js_rev, &s0, &plain_msg, effects.clone())).unwrap();
    });
    let js_fuel = block_on(sb.step(TENANT, &js_rev, &s0, &js_msg, effects.clone()))
        .unwrap()
        .fuel_used;

    // JavaScript on a new revision: the time includes the instance's load, which builds and
    // locks down the context; the fuel is the step's own.
    let mut js_cold = vec![];
    let mut js_cold_fuel = 0;
    for i in 0..10 {
        let r = Revision::new(&format!("js-cold-{i}"), &js_bot);
        let t = Instant::now();
        let out = block_on(sb.step(TENANT, &r, &s0, &js_msg, effects.clone())).unwrap();
        js_cold.push(t.elapsed());
        js_cold_fuel = out.fuel_used;
    }
    js_cold.sort();
    let js_cold_ms = js_cold[js_cold.len() / 2].as_secs_f64() * 1e3;

    // The pizza bot's pick step, its mapping written as a JavaScript method instead of a
    // declarative mapping, against the same step of the plain bot (alternated rounds).
    let mapped_source = std::fs::read_to_string(root.join("examples/pizza/bot.yml"))?;
    let declarative = "            mapping:\n              context.pizza: payload.pizza\n";
    anyhow::ensure!(
        mapped_source.contains(declarative),
        "the pizza bot's pick mapping moved"
    );
    let mapped_source = mapped_source
        .replace(declarative, "            mapping: pickPizza\n")
        .replace(
            "\nflows:\n",
            "\nmethods:\n  pickPizza(ctx): \"ctx.context.pizza = ctx.payload.pizza;\"\nflows:\n",
        );
    let mapped = compile_source(&mapped_source)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .bot;
    let mapped_rev = Revision::new("pizza-mapped", &mapped);
    let pick = SessionJson::new(serde_json::to_string(&sessions[1])?);
    let pick_step = |rev: &Revision| {
        let out =
            block_on(sb.step_json(TENANT, rev, &pick, &messages[1], effects.clone())).unwrap();
        assert!(
            out.session.json.contains("pepperoni"),
            "the pick was mapped"
        );
        out.fuel_used
    };
    pick_step(&mapped_rev);
    // `BOTBOX_PROFILE_JS=n`: only run the mapped pick step n times (for perf).
    if let Some(n) = std::env::var("BOTBOX_PROFILE_JS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        for _ in 0..n {
            pick_step(&mapped_rev);
        }
        return Ok(());
    }
    let (mut plain_pick, mut mapped_pick, mut pick_ratios) = (vec![], vec![], vec![]);
    for _round in 0..15 {
        let p = median_us(40, || {
            pick_step(&rev);
        });
        let m = median_us(40, || {
            pick_step(&mapped_rev);
        });
        plain_pick.push(p);
        mapped_pick.push(m);
        pick_ratios.push(m / p);
    }
    let (plain_pick_fuel, mapped_pick_fuel) = (pick_step(&rev), pick_step(&mapped_rev));
    let plain_pick_us = median(&mut plain_pick);
    let mapped_pick_us = median(&mut mapped_pick);
    let pick_ratio = median(&mut pick_ratios);

    // Cold start: a revision never seen before, to its first answer (artifact cached).
    let mut cold = vec![];
    for i in 0..20 {
        let r = Revision::new(&format!("cold-{i}"), &pizza);
        let t = Instant::now();
        block_on(sb.step(TENANT, &r, &sessions[0], &messages[0], effects.clone())).unwrap();
        cold.push(t.elapsed());
    }
    cold.sort();
    let cold_ms = cold[cold.len() / 2].as_secs_f64() * 1e3;

    // Memory: warm instances of distinct revisions kept alive at once.
    let n = 100;
    let before = rss_bytes();
    for i in 0..n {
        let r = Revision::new(&format!("mem-{i}"), &pizza);
        block_on(sb.step(TENANT, &r, &sessions[0], &messages[0], effects.clone())).unwrap();
    }
    let per_instance = (rss_bytes().saturating_sub(before)) as f64 / n as f64;

    println!("sandbox benchmark (pooling allocator: {})", sb.pooling());
    println!("  sandbox start with cached artifact     {start_ms:>9.1} ms");
    println!("  pizza step, native                     {native_us:>9.1} µs / message");
    println!(
        "  pizza step, sandbox, live path         {sandbox_us:>9.1} µs / message  ({ratio:.1}x native; session kept in the instance, JSON out)"
    );
    println!(
        "  pizza step, sandbox, Session values    {value_us:>9.1} µs / message  ({value_ratio:.1}x native, {fuel} fuel for message 1)"
    );
    println!("  empty step (nothing matches), native     {idle_native:>9.1} µs");
    println!(
        "  empty step (nothing matches), sandbox    {idle_sandbox:>9.1} µs  ({idle_fuel} fuel: the boundary's fixed cost)"
    );
    println!("  step with one JS method call           {with_js:>9.1} µs  ({js_fuel} fuel)");
    println!(
        "  same step without JS                   {without_js:>9.1} µs  (JS call costs {:.1} µs)",
        with_js - without_js
    );
    println!(
        "  first JS step of a new revision        {js_cold_ms:>9.2} ms  ({js_cold_fuel} fuel in the step; the lockdown is the load's)"
    );
    println!(
        "  pizza pick step, JS mapping method     {mapped_pick_us:>9.1} µs  ({pick_ratio:.2}x the declarative mapping's {plain_pick_us:.1} µs; fuel {mapped_pick_fuel} against {plain_pick_fuel})"
    );
    println!("  new revision to first answer (median)  {cold_ms:>9.2} ms");
    println!(
        "  memory per warm instance               {:>9.2} MiB  (~{:.0} instances per GB)",
        per_instance / 1048576.0,
        1e9 / per_instance.max(1.0)
    );
    Ok(())
}
