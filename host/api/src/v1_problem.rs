//! The `/v1` error body: a service [`Problem`] written as RFC 9457 problem+json, its `type`
//! a page under the server's `/docs/problems/`, with the request's id.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use botbox_service::agent::Problem;
use serde_json::{Map, Value as Json};

/// A `/v1` handler's error: a service problem on its way to the client.
#[derive(Debug)]
pub struct V1Error(pub Problem);

pub type V1Result<T> = Result<T, V1Error>;

impl From<Problem> for V1Error {
    fn from(p: Problem) -> Self {
        V1Error(p)
    }
}

impl From<botbox_service::cases::worker::CaseError> for V1Error {
    fn from(e: botbox_service::cases::worker::CaseError) -> Self {
        V1Error(e.into())
    }
}

impl From<botbox_store::DbError> for V1Error {
    fn from(e: botbox_store::DbError) -> Self {
        V1Error(e.into())
    }
}

/// The request's base URL and id, set by the `/v1` middleware for the error bodies.
#[derive(Clone)]
pub struct RequestInfo {
    pub base: std::sync::Arc<str>,
    pub id: String,
}

tokio::task_local! {
    pub static REQUEST: RequestInfo;
}

/// The problem+json document of `p` (its `type` made from `base`).
pub fn body(p: &Problem, base: &str, request_id: &str) -> Json {
    let mut m = Map::new();
    let ty = match p.type_uri {
        Some(t) => t.to_owned(),
        None => format!("{}/docs/problems/{}", base.trim_end_matches('/'), p.code),
    };
    m.insert("type".into(), ty.into());
    m.insert("title".into(), p.title.into());
    m.insert("status".into(), p.status.as_u16().into());
    m.insert("detail".into(), p.detail.clone().into());
    m.insert("code".into(), p.code.into());
    m.insert("requestId".into(), request_id.into());
    for (k, v) in &p.extra {
        m.insert(k.clone(), v.clone());
    }
    Json::Object(m)
}

impl IntoResponse for V1Error {
    fn into_response(self) -> Response {
        let p = self.0;
        let (base, id) = REQUEST
            .try_with(|r| (r.base.to_string(), r.id.clone()))
            .unwrap_or_else(|_| (String::new(), String::new()));
        let body = serde_json::to_vec(&body(&p, &base, &id)).unwrap_or_default();
        let mut r = (p.status, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        for (k, v) in p.headers {
            r.headers_mut().append(k, v);
        }
        r
    }
}
