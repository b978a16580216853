//! RFC 9457 problem details, the error body of every `/v1` answer.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value as Json, json};

/// The IANA problem type of a rate limit (draft-ietf-httpapi-ratelimit-headers 11).
pub const QUOTA_EXCEEDED_TYPE: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// A problem answer. `code` is a stable slug, one per kind of problem.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: StatusCode,
    pub code: &'static str,
    pub title: &'static str,
    pub detail: String,
    /// Extension members (`activeRunId`, `errors`, `violated-policies`, ...).
    pub extra: Map<String, Json>,
    /// Extra headers (`Retry-After`, the rate-limit fields, `WWW-Authenticate`).
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
    /// Overrides `{base}/docs/problems/<code>` as the `type`.
    pub type_uri: Option<&'static str>,
}

pub type V1Result<T> = Result<T, Problem>;

impl Problem {
    pub fn new(
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Problem {
        Problem {
            status,
            code,
            title,
            detail: detail.into(),
            extra: Map::new(),
            headers: Vec::new(),
            type_uri: None,
        }
    }

    pub fn with(mut self, key: &str, value: Json) -> Problem {
        self.extra.insert(key.to_owned(), value);
        self
    }

    pub fn header(mut self, name: header::HeaderName, value: HeaderValue) -> Problem {
        self.headers.push((name, value));
        self
    }

    pub fn invalid(detail: impl Into<String>) -> Problem {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            "The request is invalid",
            detail,
        )
    }

    /// A 400 pointing at one member of the body.
    pub fn invalid_at(pointer: &str, detail: impl Into<String>) -> Problem {
        let detail = detail.into();
        Problem::invalid(detail.clone())
            .with("errors", json!([{"pointer": pointer, "detail": detail}]))
    }

    /// One message for every key problem: no hint which case applied.
    pub fn unauthorized() -> Problem {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            "A valid API key is required: Authorization: Bearer <key>.",
        )
        .header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
    }

    pub fn forbidden(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::FORBIDDEN, "forbidden", "Forbidden", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    pub fn conflict(code: &'static str, title: &'static str, detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::CONFLICT, code, title, detail)
    }

    pub fn internal(e: impl std::fmt::Display) -> Problem {
        tracing::error!(error = %e, "internal error on /v1");
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "Something went wrong on our side; the requestId identifies this occurrence.",
        )
    }

    pub fn unavailable(detail: impl Into<String>) -> Problem {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            detail,
        )
        .header(header::RETRY_AFTER, HeaderValue::from_static("1"))
    }

    /// The JSON document (with `type` made from `base`).
    pub fn body(&self, base: &str, request_id: &str) -> Json {
        let mut m = Map::new();
        let ty = match self.type_uri {
            Some(t) => t.to_owned(),
            None => format!("{}/docs/problems/{}", base.trim_end_matches('/'), self.code),
        };
        m.insert("type".into(), ty.into());
        m.insert("title".into(), self.title.into());
        m.insert("status".into(), self.status.as_u16().into());
        m.insert("detail".into(), self.detail.clone().into());
        m.insert("code".into(), self.code.into());
        m.insert("requestId".into(), request_id.into());
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Json::Object(m)
    }
}

impl From<botbox_store::DbError> for Problem {
    fn from(e: botbox_store::DbError) -> Self {
        Problem::internal(e)
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

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let (base, id) = REQUEST
            .try_with(|r| (r.base.to_string(), r.id.clone()))
            .unwrap_or_else(|_| (String::new(), String::new()));
        let body = serde_json::to_vec(&self.body(&base, &id)).unwrap_or_default();
        let mut r = (self.status, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        for (k, v) in self.headers {
            r.headers_mut().append(k, v);
        }
        r
    }
}
