//! How a handler's failure becomes its answer: [`HandlerError`], and [`answer`], the one place
//! where errors become msprobe's `{"success": false, "error": "<text>"}`.

use graph_ascend_proto as pb;
use graph_ascend_visdb::StoreError;

use crate::messages::{Lang, Msg};

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The request is malformed or names something that does not exist; `Msg` is shown.
    #[error("{}", .0.text(Lang::En))]
    Invalid(Msg),
    /// The file could not be read; the message names the file.
    #[error("{1}")]
    Store(Msg, StoreError),
    /// A colour legend msprobe refuses (its texts are English in both languages).
    #[error(transparent)]
    Colors(ColorsError),
    /// A conversion that cannot start (the text names the path or the limit).
    #[error(transparent)]
    Conversion(crate::convert_jobs::StartError),
    /// A file that cannot be diagnosed (not a compare file, no such step); the text names it.
    #[error("{1}")]
    Diagnosis(Msg, graph_ascend_diagnose::DiagnoseError),
}

impl HandlerError {
    /// The text for the page: the message, plus the file-level reason when there is one.
    pub fn text(&self, lang: Lang) -> String {
        match self {
            HandlerError::Invalid(msg) => msg.text(lang).to_owned(),
            HandlerError::Store(msg, err) => format!("{} {err}", msg.text(lang)),
            HandlerError::Colors(err) => err.to_string(),
            HandlerError::Conversion(err) => err.to_string(),
            HandlerError::Diagnosis(msg, err) => format!("{} {err}", msg.text(lang)),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, HandlerError>;

/// Attaches a user-facing message to store failures.
pub(crate) trait StoreContext<T> {
    fn context(self, msg: Msg) -> Result<T>;
}

impl<T> StoreContext<T> for std::result::Result<T, StoreError> {
    fn context(self, msg: Msg) -> Result<T> {
        self.map_err(|e| HandlerError::Store(msg, e))
    }
}

/// A response type that can carry msprobe's `{success: false, error}`.
pub(crate) trait Failure: Default {
    fn failure(error: String) -> Self;
}

macro_rules! failure {
    ($($t:ty),*) => {$(
        impl Failure for $t {
            #[allow(clippy::needless_update)]
            fn failure(error: String) -> Self {
                Self { success: false, error: Some(error), ..Default::default() }
            }
        }
    )*};
}

failure!(
    pb::StatusResponse,
    pb::ConfigInfoResponse,
    pb::NodeListResponse,
    pb::HierarchyResponse,
    pb::NodeInfoResponse,
    pb::FilterNodesResponse,
    pb::SearchNodesResponse,
    pb::MatchedRelationsResponse,
    pb::MatchResultResponse,
    pb::SaveMatchedRelationsResponse,
    pb::ConvertCandidatesResponse,
    pb::ConvertStartResponse,
    pb::DiagnoseResponse,
    pb::DivergenceMapResponse,
    pb::FileChunk
);

/// Turns a handler result into the response message, failures included: the one place where
/// errors become msprobe's answers.
pub(crate) fn answer<T: Failure>(lang: Lang, result: Result<T>) -> T {
    match result {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!("request failed: {e}");
            T::failure(e.text(lang))
        }
    }
}

/// Why msprobe's `validate_colors_param` refuses a legend; the texts are msprobe's (English in
/// both languages).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ColorsError {
    #[error("Colors must be an object")]
    NotObject,
    #[error("Colors cannot be empty")]
    Empty,
    #[error("Illegal color key: {0}")]
    IllegalKey(String),
    #[error("The value of {0} must be an object")]
    NotAnObject(String),
    #[error("The value of {0} lacks the value field")]
    NoValue(String),
    #[error("The value of {0} must be an array of length 2")]
    NotAPair(String),
    #[error("The value of {0} must consist of numbers")]
    NotNumbers(String),
    #[error("The value range of {0} is invalid")]
    EmptyRange(String),
    #[error("Unsupported value: {0}")]
    UnsupportedValue(String),
    #[error("The value of {0} has the wrong type")]
    WrongType(String),
    #[error("The description of {0} is not a string")]
    DescriptionNotText(String),
    #[error("The description of {0} is not allowed")]
    DescriptionRefused(String),
}
