//! What a workspace registers to hear from and talk to its Cases: callback endpoints (where
//! task events are sent) and inbound hooks (URLs whose signed calls create tasks). The
//! checks on a registration and the new row; storing it and showing its secret is the
//! caller's.

use super::webhooks::EVENT_TYPES;
use super::worker::CaseError;
use super::{CaseSpec, ENDPOINT_PREFIX, HOOK_PREFIX};
use crate::agent::new_prefixed;
use botbox_store::{CaseRow, EndpointRow, HookRow, now_ms};
use serde_json::{Map, Value as Json, json};

/// The events an endpoint hears when it names none.
const DEFAULT_EVENTS: [&str; 3] = ["task.review_requested", "task.completed", "task.failed"];

/// A registration refused at JSON pointer `at`.
fn invalid(at: &str, detail: impl Into<String>) -> CaseError {
    CaseError::Invalid(vec![(at.to_owned(), detail.into())])
}

/// An endpoint's URL: HTTPS (http too when the deployment allows it), with a host, at most
/// 2048 characters.
pub fn check_url(u: &str, allow_http: bool) -> Result<(), CaseError> {
    match url::Url::parse(u) {
        Ok(p) if p.scheme() == "http" && !allow_http => Err(invalid(
            "/url",
            "must be an https URL (this server does not send callbacks over plain http)",
        )),
        Ok(p)
            if matches!(p.scheme(), "http" | "https") && p.host().is_some() && u.len() <= 2048 =>
        {
            Ok(())
        }
        _ => Err(invalid(
            "/url",
            "must be an https URL of at most 2048 characters",
        )),
    }
}

/// `eventTypes` of an endpoint: absent means every task event; otherwise known types or `*`.
fn event_types(v: Option<&Json>) -> Result<Vec<String>, CaseError> {
    let Some(v) = v else {
        return Ok(DEFAULT_EVENTS.map(str::to_owned).to_vec());
    };
    let list = v
        .as_array()
        .ok_or_else(|| invalid("/eventTypes", "must be an array"))?;
    let known = |t: &&str| *t == "*" || EVENT_TYPES.contains(t);
    list.iter()
        .enumerate()
        .map(|(i, t)| match t.as_str().filter(known) {
            Some(t) => Ok(t.to_owned()),
            None => Err(invalid(
                &format!("/eventTypes/{i}"),
                format!(
                    "unknown event type; one of {}, or *",
                    EVENT_TYPES.join(", ")
                ),
            )),
        })
        .collect()
}

/// A callback endpoint of workspace `ws` from `{url, eventTypes?}`, registered by `by`.
pub fn new_endpoint(
    ws: &str,
    body: &Json,
    by: &str,
    allow_http: bool,
) -> Result<EndpointRow, CaseError> {
    let url = body["url"].as_str().unwrap_or_default().to_owned();
    check_url(&url, allow_http)?;
    let types = event_types(body.get("eventTypes"))?;
    Ok(EndpointRow {
        id: new_prefixed(ENDPOINT_PREFIX),
        workspace_id: ws.to_owned(),
        url,
        event_types: json!(types).to_string(),
        enabled: 1,
        disabled_reason: None,
        generation: 1,
        previous_until: None,
        created_by: by.to_owned(),
        created_at: now_ms(),
        exhausted: 0,
        failing_since: None,
    })
}

/// A hook's `mapping`: per input field of the Case, a JSON pointer into the caller's body.
fn hook_mapping(spec: &CaseSpec, v: Option<&Json>) -> Result<Map<String, Json>, CaseError> {
    let m = match v {
        None | Some(Json::Null) => return Ok(Map::new()),
        Some(Json::Object(m)) => m,
        Some(_) => return Err(invalid("/mapping", "must be an object")),
    };
    for (k, v) in m {
        let at = format!("/mapping/{k}");
        if !spec.inputs.iter().any(|f| &f.name == k) {
            let detail = format!("\"{k}\" is not an input field of the Case");
            return Err(invalid(&at, detail));
        }
        if !v
            .as_str()
            .is_some_and(|p| p.is_empty() || p.starts_with('/'))
        {
            let detail = "must be a JSON pointer into the body (\"/order/id\")";
            return Err(invalid(&at, detail));
        }
    }
    Ok(m.clone())
}

/// An inbound hook on Case `c` from `{caseId, mapping?}`, registered by `by`.
pub fn new_hook(c: &CaseRow, body: &Json, by: &str) -> Result<HookRow, CaseError> {
    let spec: CaseSpec =
        serde_json::from_str(&c.spec).map_err(|e| CaseError::Internal(e.into()))?;
    let mapping = hook_mapping(&spec, body.get("mapping"))?;
    Ok(HookRow {
        id: new_prefixed(HOOK_PREFIX),
        workspace_id: c.workspace_id.clone(),
        case_id: c.id.clone(),
        mapping: Json::Object(mapping).to_string(),
        generation: 1,
        created_by: by.to_owned(),
        created_at: now_ms(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls_are_https_unless_the_deployment_allows_http() {
        assert!(check_url("https://hooks.example/cb", false).is_ok());
        assert!(check_url("http://hooks.example/cb", false).is_err());
        assert!(check_url("http://127.0.0.1:9/cb", true).is_ok());
        assert!(check_url("ftp://hooks.example/cb", true).is_err());
        assert!(check_url("https://", false).is_err());
        let long = format!("https://hooks.example/{}", "a".repeat(2048));
        assert!(check_url(&long, false).is_err());
    }

    #[test]
    fn event_types_default_to_task_events_and_name_the_bad_one() {
        assert_eq!(event_types(None).unwrap(), DEFAULT_EVENTS);
        assert_eq!(event_types(Some(&json!(["*"]))).unwrap(), ["*"]);
        let e = event_types(Some(&json!(["task.failed", "task.lost"]))).unwrap_err();
        assert!(matches!(e, CaseError::Invalid(p) if p[0].0 == "/eventTypes/1"));
        assert!(event_types(Some(&json!("task.failed"))).is_err());
    }
}
