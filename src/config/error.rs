//! Configuration errors: one line each, naming file, line, column and field.

use std::fmt;

/// A configuration that cannot be used, and where the problem is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or embedded source) the configuration came from.
    pub source: String,
    /// 1-based line and column, where the parser knows them.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The field, as a path such as `devices[1].size`; empty when the
    /// message names it or the whole file is at fault.
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub(crate) fn file(source: &str, err: std::io::Error) -> ConfigError {
        ConfigError {
            source: source.to_string(),
            line: None,
            column: None,
            field: String::new(),
            message: format!("cannot read: {err}"),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}
