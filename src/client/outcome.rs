//! How an operation ended: `fail` when it certainly did not take effect, `info` when it may
//! or may not have.

use std::fmt;
use std::time::Duration;

use zookeeper_client::Error;

use crate::history::{OpType, BAD_VERSION, LOST, NO_NODE};

/// Why an operation did not complete `ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    /// The ZooKeeper client returned this error.
    Zk(Error),
    /// No answer within the client-side deadline; the request may still be applied.
    Deadline(Duration),
    /// The server's answer proves state it had acknowledged gone: a znode the workload
    /// created (or saw created) and that nothing deletes was answered `no-node`. It says
    /// what was lost; recorded as `lost: <what>` for the checkers to judge.
    Lost(String),
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::Zk(e) => write!(f, "{}", error_name(e)),
            OpError::Deadline(d) => write!(f, "timeout: no answer within {} ms", d.as_millis()),
            OpError::Lost(what) => write!(f, "{LOST}: {what}"),
        }
    }
}

impl From<Error> for OpError {
    fn from(e: Error) -> OpError {
        OpError::Zk(e)
    }
}

/// Reads a `no-node` answer on a znode that must exist as the fact it is.
pub trait NoNodeIsLost<T> {
    /// This result, with a `no-node` error turned into [`OpError::Lost`] saying `what`.
    fn no_node_is_lost(self, what: impl FnOnce() -> String) -> Result<T, OpError>;
}

impl<T> NoNodeIsLost<T> for Result<T, OpError> {
    fn no_node_is_lost(self, what: impl FnOnce() -> String) -> Result<T, OpError> {
        self.map_err(|e| match e {
            OpError::Zk(Error::NoNode) => OpError::Lost(what()),
            other => other,
        })
    }
}

/// The history outcome of an operation that ended in `err`: [`OpType::Fail`] when the server
/// (or the client, before sending) refused it so it certainly did not take effect, and
/// [`OpType::Info`] when it may have taken effect (connection loss, timeout, an expired
/// session with the request in flight, and anything not known to be a refusal). Reads are
/// classified the same way; checkers drop reads that end `info`.
pub fn classify(err: &OpError) -> OpType {
    let e = match err {
        OpError::Deadline(_) => return OpType::Info,
        // The server answered: the operation did not do what it was asked.
        OpError::Lost(_) => return OpType::Fail,
        OpError::Zk(e) => e,
    };
    match e {
        // The server answered with a refusal: the request was not applied.
        Error::BadVersion
        | Error::NoNode
        | Error::NodeExists
        | Error::NoAuth
        | Error::NotEmpty
        | Error::NoChildrenForEphemerals
        | Error::InvalidAcl
        | Error::SessionMoved
        | Error::NotReadOnly
        | Error::NoWatcher
        | Error::QuotaExceeded
        | Error::Throttled
        | Error::MarshallingError
        | Error::Unimplemented
        | Error::ReconfigDisabled
        // Rejected by the client before anything was sent.
        | Error::BadArguments(_) => OpType::Fail,
        // In flight when the connection or session went away, or an answer not understood.
        Error::ConnectionLoss
        | Error::Timeout
        | Error::SessionExpired
        | Error::ClientClosed
        | Error::AuthFailed
        | Error::NoHosts
        | Error::UnmarshalError { .. }
        | Error::UnexpectedError(_)
        | Error::UnexpectedErrorCode(_)
        | Error::RuntimeInconsistent
        | Error::Custom(_) => OpType::Info,
        _ => OpType::Info,
    }
}

/// A short, stable name for an error, as written to the history's `error` field.
fn error_name(e: &Error) -> String {
    match e {
        Error::BadVersion => BAD_VERSION.into(),
        Error::NoNode => NO_NODE.into(),
        Error::NodeExists => "node-exists".into(),
        Error::NoAuth => "no-auth".into(),
        Error::ConnectionLoss => "connection-loss".into(),
        Error::SessionExpired => "session-expired".into(),
        Error::Timeout => "timeout".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zk(e: Error) -> OpType {
        classify(&OpError::Zk(e))
    }

    #[test]
    fn server_refusals_fail() {
        for e in [
            Error::BadVersion,
            Error::NoNode,
            Error::NodeExists,
            Error::NoAuth,
            Error::NotEmpty,
            Error::NoChildrenForEphemerals,
            Error::InvalidAcl,
            Error::SessionMoved,
            Error::NotReadOnly,
            Error::QuotaExceeded,
            Error::Throttled,
            Error::MarshallingError,
            Error::Unimplemented,
            Error::ReconfigDisabled,
            Error::BadArguments(&"bad path"),
        ] {
            assert_eq!(zk(e.clone()), OpType::Fail, "{e:?}");
        }
    }

    #[test]
    fn uncertain_outcomes_are_info() {
        for e in [
            Error::ConnectionLoss,
            Error::Timeout,
            Error::SessionExpired,
            Error::ClientClosed,
            Error::AuthFailed,
            Error::NoHosts,
            Error::UnexpectedError("boom".into()),
            Error::UnexpectedErrorCode(-999),
            Error::RuntimeInconsistent,
        ] {
            assert_eq!(zk(e.clone()), OpType::Info, "{e:?}");
        }
        assert_eq!(
            classify(&OpError::Deadline(Duration::from_secs(5))),
            OpType::Info
        );
    }

    #[test]
    fn a_no_node_answer_on_a_znode_that_must_exist_is_a_loss() {
        let gone: Result<(), OpError> = Err(OpError::Zk(Error::NoNode));
        let lost = gone.no_node_is_lost(|| "the queue node /q is gone".into());
        let err = lost.unwrap_err();
        assert_eq!(err.to_string(), "lost: the queue node /q is gone");
        assert_eq!(classify(&err), OpType::Fail);
        let other: Result<(), OpError> = Err(OpError::Zk(Error::ConnectionLoss));
        assert_eq!(
            other.no_node_is_lost(|| unreachable!()),
            Err(OpError::Zk(Error::ConnectionLoss))
        );
    }

    #[test]
    fn errors_have_stable_names() {
        assert_eq!(OpError::Zk(Error::BadVersion).to_string(), "bad-version");
        assert_eq!(
            OpError::Zk(Error::ConnectionLoss).to_string(),
            "connection-loss"
        );
        assert_eq!(
            OpError::Deadline(Duration::from_millis(1500)).to_string(),
            "timeout: no answer within 1500 ms"
        );
    }
}
