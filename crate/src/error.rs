//! One error type for the whole engine. Its `kind` survives the trip into JavaScript, where it
//! becomes `KvEngineError.code`, so callers can branch on what went wrong.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotFound,
    CorruptFile,
    Unsupported,
    ContextOverflow,
    Disposed,
    Aborted,
    Internal,
}

impl ErrorKind {
    /// The code JavaScript sees; must match `KvEngineErrorCode` in src/KvEngineError.ts.
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::NotFound => "NOT_FOUND",
            Self::CorruptFile => "CORRUPT_FILE",
            Self::Unsupported => "UNSUPPORTED",
            Self::ContextOverflow => "CONTEXT_OVERFLOW",
            Self::Disposed => "DISPOSED",
            Self::Aborted => "ABORTED",
            Self::Internal => "INTERNAL",
        }
    }
}

/// The code as a string, which is how the binding hands it to JavaScript (a JS error's `code`).
impl AsRef<str> for ErrorKind {
    fn as_ref(&self) -> &str {
        self.code()
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::CorruptFile, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    /// Prefixes the message with where it happened, keeping the kind.
    pub fn context(self, what: impl fmt::Display) -> Self {
        Self { kind: self.kind, message: format!("{what}: {}", self.message) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// candle errors reach us from tensor maths (a bug on our side) and from file parsing (bad input).
/// Call sites that parse files wrap them with `Error::corrupt` themselves; the rest are internal.
impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Self::internal(format!("tensor operation failed: {}", candle_message(&e)))
    }
}

/// candle appends a multi-line backtrace when RUST_BACKTRACE is set; users need the first line.
pub fn candle_message(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData => ErrorKind::CorruptFile,
            _ => ErrorKind::Internal,
        };
        Self::new(kind, e.to_string())
    }
}

/// Attaches a kind and a human context to any displayable error.
pub trait ResultExt<T> {
    fn or_kind(self, kind: ErrorKind, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> ResultExt<T> for std::result::Result<T, E> {
    fn or_kind(self, kind: ErrorKind, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::new(kind, format!("{what}: {e}")))
    }
}

#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new($crate::error::ErrorKind::$kind, format!($($arg)*)))
    };
}
