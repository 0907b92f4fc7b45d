//! The `session` section every workload file shares: how each process opens its ZooKeeper
//! session and how long one request may take.

use serde::{Deserialize, Serialize};

use crate::checker::liveness::LivenessOptions;
use crate::client::{ClientOptions, Connect};
use crate::config::Duration;

/// How processes open their sessions (the `session` section of a workload file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// Node-bound sessions (`node`: processes spread over the nodes) or ensemble-wide ones
    /// (`ensemble`: a session may move between nodes).
    pub connect: Connect,
    /// Client-side deadline of one request (and of opening a session); an operation without
    /// an answer by then ends `info`.
    pub op_timeout: Duration,
    /// The ZooKeeper session timeout asked for.
    pub session_timeout: Duration,
}

impl Default for SessionConfig {
    fn default() -> SessionConfig {
        let secs = |s| Duration(std::time::Duration::from_secs(s));
        SessionConfig {
            connect: Connect::Node,
            op_timeout: secs(5),
            session_timeout: secs(10),
        }
    }
}

impl SessionConfig {
    /// Checks the deadlines; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        self.client_options().validate("session")
    }

    /// The options processes open their sessions with.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            connect: self.connect,
            op_timeout: self.op_timeout.0,
            session_timeout: self.session_timeout.0,
        }
    }

    /// How long after the heal progress may take, for the liveness checkers: a session
    /// timeout plus a request deadline.
    pub fn liveness(&self) -> LivenessOptions {
        LivenessOptions::for_sessions(self.session_timeout.0, self.op_timeout.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_bad_values_are_named() {
        let cfg: SessionConfig =
            serde_yaml_ng::from_str("connect: ensemble\nop_timeout: 2s\n").unwrap();
        assert_eq!(cfg.connect, Connect::Ensemble);
        assert_eq!(cfg.op_timeout.0, std::time::Duration::from_secs(2));
        assert_eq!(
            cfg.session_timeout,
            SessionConfig::default().session_timeout
        );
        let err = serde_yaml_ng::from_str::<SessionConfig>("timeout: 1s\n").unwrap_err();
        assert!(err.to_string().contains("timeout"), "{err}");
        let zero = SessionConfig {
            op_timeout: Duration(std::time::Duration::ZERO),
            ..SessionConfig::default()
        };
        assert_eq!(
            zero.validate().unwrap_err(),
            "session.op_timeout must be above 0"
        );
    }
}
