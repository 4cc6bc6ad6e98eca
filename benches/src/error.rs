//! Why `hashtile-bench` stops early, and the exit status each reason gives.

use std::fmt;

/// Why `hashtile-bench` stops early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchError {
    /// A bad command line (exit status 2), found before anything was measured.
    Input(String),
    /// A failure while running (exit status 1).
    Run(String),
}

impl BenchError {
    /// The process exit status.
    pub fn status(&self) -> i32 {
        match self {
            BenchError::Input(_) => 2,
            BenchError::Run(_) => 1,
        }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Input(m) | BenchError::Run(m) => f.write_str(m),
        }
    }
}

impl From<String> for BenchError {
    /// The command line's checks return `Result<_, String>`: their errors are input errors.
    fn from(m: String) -> Self {
        BenchError::Input(m)
    }
}
