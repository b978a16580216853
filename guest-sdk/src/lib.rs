//! guest-sdk: the guest side of the botbox sandbox.
//!
//! [`js::JsRuntime`] gives bots JavaScript (methods, expressions outside the fast subset) on
//! boa. [`native::NativeStepper`] runs runtime-core with it in-process: the reference
//! implementation the sandboxed guest must agree with, used by the example conversation tests.
//!
//! May depend on: `runtime-core` and boa only. Must never reach anything but its WIT imports: in
//! the sandbox it has no files, network, clock or environment, and every effect is a host
//! call the host may refuse.

pub mod alloc;
pub mod js;
mod js_json;
pub mod json;
pub mod native;

#[cfg(target_arch = "wasm32")]
mod guest;
