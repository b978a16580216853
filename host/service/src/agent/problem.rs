//! Why a `/v1` request failed, as the service decides it: a status, a stable code, a title,
//! the detail, extension members and headers. The HTTP layer writes it as an RFC 9457
//! problem+json body; nothing here knows how.

use http::{HeaderValue, StatusCode, header};
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
}

impl From<botbox_store::DbError> for Problem {
    fn from(e: botbox_store::DbError) -> Self {
        Problem::internal(e)
    }
}
