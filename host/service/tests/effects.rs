//! The real effects behind a sandboxed step: an api action goes out through the egress
//! policy, which refuses private addresses unless the operator allowed them.

use botbox_egress::{Egress, EgressConfig};
use botbox_sandbox::effects::Effects;
use botbox_sandbox::{Revision, Sandbox, SandboxConfig, block_on};
use botbox_service::effects::LiveEffects;
use runtime_core::testing::fresh_session;
use runtime_core::{Message, compile_source};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// A bot that calls the URL it is sent and says the result.
const CALLER: &str = r#"
name: caller
flows:
  f:
    intents:
      any: {initial: true, type: text}
    states:
      s:
        initial: true
        transitions:
          call: "true"
      call:
        end: true
        action:
          - {name: api, options: {uri: "$(content)"}}
          - {name: text, options: {text: "result=$(result)"}}
"#;

fn live(egress: EgressConfig) -> Arc<dyn Effects> {
    let egress = Arc::new(Egress::new(&egress).unwrap());
    Arc::new(LiveEffects::new(egress).unwrap())
}

/// A loopback server answering every request with `{"a":1}`.
fn answering_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let mut s = s.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\nconnection: close\r\n\r\n{\"a\":1}\n");
        }
    });
    format!("http://{addr}/x")
}

#[test]
fn private_addresses_are_refused_unless_allowed() {
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("guest-cache"),
        ..SandboxConfig::default()
    })
    .unwrap();
    let rev = Revision::new("caller", &compile_source(CALLER).unwrap().bot);
    let url = answering_server();
    let say = |fx: Arc<dyn Effects>| {
        let out = block_on(sandbox.step("t", &rev, &fresh_session(), &Message::text(&url), fx));
        let out = out.unwrap().result;
        out.responses[0].content.clone().unwrap()
    };
    assert_eq!(say(live(EgressConfig::allow_all())), r#"result={"a":1}"#);
    // The default egress policy (no allow-list) refuses loopback.
    assert_eq!(say(live(EgressConfig::default())), "result=");
}
