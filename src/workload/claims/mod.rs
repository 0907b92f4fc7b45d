//! The two ephemeral-node primitives the lock and election recipes are built from: one node
//! everybody tries to create ([`claim`]), and a line of sequential children in which each
//! waits for its predecessor ([`Line`]). They send every request through [`Requests`]
//! (deadline, herd meter) and state the facts of lost acknowledged state they come upon as
//! [`crate::client::OpError::Lost`].
//!
//! [`Requests`]: crate::workload::Requests

mod claim;
mod line;

pub use claim::claim;
pub use line::Line;

/// An ephemeral znode a participant created and owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// The znode's czxid: the token that made its owner holder or leader.
    pub token: i64,
    /// The znode's path, deleted to give it up.
    pub node: String,
}

/// A persistent znode, created at setup and never deleted, that a recipe's ephemeral nodes
/// live under.
#[derive(Debug, Clone, Copy)]
pub struct Dir<'a> {
    /// Its path.
    pub path: &'a str,
    /// Whose it is, as the facts of lost state name it: `lock`, `election`.
    pub recipe: &'a str,
}

impl Dir<'_> {
    /// The fact a `no-node` answer on this directory states.
    pub fn gone(&self) -> String {
        format!(
            "the {} directory {}, created at setup and never deleted, is gone",
            self.recipe, self.path
        )
    }
}

/// The fact a live session's own ephemeral node missing states; `what` names the node (`lock
/// node`, `candidate node`, `node`).
pub fn own_node_gone(what: &str, node: &str) -> String {
    format!("our {what} {node} is gone though our session lives")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_of_lost_state_name_the_recipe_and_the_node() {
        let dir = Dir {
            path: "/stampede/r/lock",
            recipe: "lock",
        };
        assert_eq!(
            dir.gone(),
            "the lock directory /stampede/r/lock, created at setup and never deleted, is gone"
        );
        assert_eq!(
            own_node_gone("candidate node", "c-0000000004"),
            "our candidate node c-0000000004 is gone though our session lives"
        );
    }
}
