//! Per-message cost of the pizza-order conversation on the native engine (no JavaScript).
//! Goal: under 20 µs per message.

use criterion::{Criterion, criterion_group, criterion_main};
use runtime_core::testing::{OfflineHost, fresh_session};
use runtime_core::{Message, compile_source, converse};
use serde_json::json;
use std::hint::black_box;

fn pizza(c: &mut Criterion) {
    let src = include_str!("../../examples/pizza/bot.yml");
    let bot = compile_source(src).unwrap().bot;
    let messages = [
        Message::text("I want pizza"),
        Message::data(json!({"type": "pizza", "pizza": "pepperoni"})),
        Message::text("2"),
        Message::data(json!({"type": "confirm", "confirm": "yes"})),
    ];
    let mut host = OfflineHost::default();
    // The session before each message of the conversation.
    let mut sessions = vec![fresh_session()];
    for m in &messages {
        let r = converse(&bot, sessions.last().unwrap(), m.clone(), &mut host).unwrap();
        assert!(!r.responses.is_empty());
        sessions.push(r.session);
    }
    c.bench_function("pizza order, whole conversation (4 messages)", |b| {
        b.iter(|| {
            for (m, s) in messages.iter().zip(&sessions) {
                black_box(converse(&bot, s, m.clone(), &mut host).unwrap());
            }
        })
    });
    let names = ["order", "pick pizza", "quantity", "confirm"];
    for ((m, s), name) in messages.iter().zip(&sessions).zip(names) {
        c.bench_function(&format!("pizza message: {name}"), |b| {
            b.iter(|| black_box(converse(&bot, s, m.clone(), &mut host).unwrap()))
        });
    }
    c.bench_function("compile pizza bot", |b| {
        b.iter(|| black_box(compile_source(src).unwrap()))
    });
}

criterion_group!(benches, pizza);
criterion_main!(benches);
