//! The request processor's write half: checks a write against the current
//! tree (paths, versions, ACLs, node kinds) and resolves it into the
//! deterministic transaction body the log stores and the tree applies.

use crate::auth::{allowed, fixup_acl, AuthId};
use crate::frame::MAX_DATA;
use crate::proto::{err, op, perms, Acl, CreateRequest, MultiOp};
use crate::tree::{owner_kind, parent_of, DataTree, OwnerKind, CONTAINER_OWNER, MAX_TTL, TTL_MARK};
use crate::txn::TxnBody;

/// Who issues a write: its session and the identities its connection proved.
pub struct Caller<'a> {
    /// Session id.
    pub session: i64,
    /// Authenticated identities.
    pub auth: &'a [AuthId],
}

/// Checks a znode path as ZooKeeper's PathUtils.validatePath does (a
/// sequential create is checked with a digit appended, as its suffix will be).
pub fn validate_path(path: &str, sequential: bool) -> Result<(), i32> {
    let checked = if sequential {
        format!("{path}1")
    } else {
        path.to_string()
    };
    let p = checked.as_str();
    if !p.starts_with('/') {
        return Err(err::BAD_ARGUMENTS);
    }
    if p == "/" {
        return Ok(());
    }
    let bad_char = |c: char| {
        c == '\0'
            || ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
    };
    for seg in p[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." || seg.chars().any(bad_char) {
            return Err(err::BAD_ARGUMENTS);
        }
    }
    Ok(())
}

fn check_version(expected: i32, actual: i32) -> Result<(), i32> {
    if expected == -1 || expected == actual {
        Ok(())
    } else {
        Err(err::BAD_VERSION)
    }
}

/// Resolves a create: the final path (with any sequence suffix) and the txn body.
pub fn prep_create(tree: &DataTree, c: &CreateRequest, caller: &Caller) -> Result<TxnBody, i32> {
    let (ephemeral, sequential, container, ttl) = match c.flags {
        0 => (false, false, false, false),
        1 => (true, false, false, false),
        2 => (false, true, false, false),
        3 => (true, true, false, false),
        4 => (false, false, true, false),
        5 => (false, false, false, true),
        6 => (false, true, false, true),
        _ => return Err(err::BAD_ARGUMENTS),
    };
    if ttl != (c.opcode == op::CREATE_TTL) || (ttl && (c.ttl <= 0 || c.ttl > MAX_TTL)) {
        return Err(err::BAD_ARGUMENTS);
    }
    if container != (c.opcode == op::CREATE_CONTAINER) {
        return Err(err::BAD_ARGUMENTS);
    }
    validate_path(&c.path, sequential)?;
    if c.path == "/" {
        return Err(err::NODE_EXISTS);
    }
    let parent_path = parent_of(&c.path);
    let parent = tree.get(parent_path).ok_or(err::NO_NODE)?;
    if !allowed(&parent.acl, caller.auth, perms::CREATE) {
        return Err(err::NO_AUTH);
    }
    let acl: Vec<Acl> = fixup_acl(&c.acl, caller.auth)?;
    let pstat = parent.stat();
    let path = if sequential {
        format!("{}{:010}", c.path, parent.seq)
    } else {
        c.path.clone()
    };
    if tree.get(&path).is_some() {
        return Err(err::NODE_EXISTS);
    }
    if matches!(owner_kind(pstat.ephemeral_owner), OwnerKind::Ephemeral(_)) {
        return Err(err::NO_CHILDREN_FOR_EPHEMERALS);
    }
    if c.data.len() > MAX_DATA {
        return Err(err::BAD_ARGUMENTS);
    }
    let ephemeral_owner = if ephemeral {
        caller.session
    } else if container {
        CONTAINER_OWNER
    } else if ttl {
        TTL_MARK | c.ttl
    } else {
        0
    };
    Ok(TxnBody::Create {
        path,
        data: c.data.clone(),
        acl,
        ephemeral_owner,
    })
}

/// Resolves a delete.
pub fn prep_delete(
    tree: &DataTree,
    path: &str,
    version: i32,
    caller: &Caller,
) -> Result<TxnBody, i32> {
    validate_path(path, false)?;
    if path == "/" || path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err(err::BAD_ARGUMENTS);
    }
    let node = tree.get(path).ok_or(err::NO_NODE)?;
    let parent = tree.get(parent_of(path)).ok_or(err::NO_NODE)?;
    if !allowed(&parent.acl, caller.auth, perms::DELETE) {
        return Err(err::NO_AUTH);
    }
    check_version(version, node.stat().version)?;
    if node.stat().num_children != 0 {
        return Err(err::NOT_EMPTY);
    }
    Ok(TxnBody::Delete {
        path: path.to_string(),
    })
}

/// Resolves a setData.
pub fn prep_set_data(
    tree: &DataTree,
    path: &str,
    data: &[u8],
    version: i32,
    caller: &Caller,
) -> Result<TxnBody, i32> {
    validate_path(path, false)?;
    let node = tree.get(path).ok_or(err::NO_NODE)?;
    if !allowed(&node.acl, caller.auth, perms::WRITE) {
        return Err(err::NO_AUTH);
    }
    if path == crate::membership::CONFIG_PATH {
        // The membership changes only through reconfig, which the broadcast counts apart.
        return Err(err::BAD_ARGUMENTS);
    }
    let stat = node.stat();
    check_version(version, stat.version)?;
    if data.len() > MAX_DATA {
        return Err(err::BAD_ARGUMENTS);
    }
    Ok(TxnBody::SetData {
        path: path.to_string(),
        data: data.to_vec(),
        version: stat.version.wrapping_add(1),
    })
}

/// Resolves a setACL.
pub fn prep_set_acl(
    tree: &DataTree,
    path: &str,
    acl: &[Acl],
    version: i32,
    caller: &Caller,
) -> Result<TxnBody, i32> {
    validate_path(path, false)?;
    let node = tree.get(path).ok_or(err::NO_NODE)?;
    if !allowed(&node.acl, caller.auth, perms::ADMIN) {
        return Err(err::NO_AUTH);
    }
    let acl = fixup_acl(acl, caller.auth)?;
    let stat = node.stat();
    check_version(version, stat.aversion)?;
    Ok(TxnBody::SetAcl {
        path: path.to_string(),
        acl,
        version: stat.aversion.wrapping_add(1),
    })
}

/// Checks a version condition (multi's check op); it changes nothing.
pub fn prep_check(tree: &DataTree, path: &str, version: i32, caller: &Caller) -> Result<(), i32> {
    validate_path(path, false)?;
    let node = tree.get(path).ok_or(err::NO_NODE)?;
    if !allowed(&node.acl, caller.auth, perms::READ) {
        return Err(err::NO_AUTH);
    }
    check_version(version, node.stat().version)
}

/// Resolves one multi op; `None` for a check, which changes nothing.
pub fn prep_multi_op(
    tree: &DataTree,
    m: &MultiOp,
    caller: &Caller,
) -> Result<Option<TxnBody>, i32> {
    match m {
        MultiOp::Create(c) => prep_create(tree, c, caller).map(Some),
        MultiOp::Delete { path, version } => prep_delete(tree, path, *version, caller).map(Some),
        MultiOp::SetData {
            path,
            data,
            version,
        } => prep_set_data(tree, path, data, *version, caller).map(Some),
        MultiOp::Check { path, version } => prep_check(tree, path, *version, caller).map(|_| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::Txn;

    fn req(path: &str, flags: i32) -> CreateRequest {
        CreateRequest {
            opcode: op::CREATE,
            path: path.into(),
            data: vec![],
            acl: vec![Acl::open()],
            flags,
            ttl: 0,
        }
    }

    #[test]
    fn paths_are_validated() {
        for ok in ["/", "/a", "/a/b", "/a-b.c"] {
            assert_eq!(validate_path(ok, false), Ok(()), "{ok}");
        }
        for bad in ["", "a", "/a/", "//", "/a//b", "/a/./b", "/..", "/a\0"] {
            assert_eq!(
                validate_path(bad, false),
                Err(err::BAD_ARGUMENTS),
                "{bad:?}"
            );
        }
        assert_eq!(validate_path("/a/", true), Ok(()));
    }

    #[test]
    fn create_rules() {
        let mut tree = DataTree::new();
        let caller = Caller {
            session: 42,
            auth: &[],
        };
        let body = prep_create(&tree, &req("/e", 1), &caller).unwrap();
        tree.apply(
            &Txn {
                zxid: 1,
                time: 0,
                session: 42,
                body,
            },
            &mut Vec::new(),
        );
        assert_eq!(
            prep_create(&tree, &req("/e", 0), &caller).unwrap_err(),
            err::NODE_EXISTS
        );
        assert_eq!(
            prep_create(&tree, &req("/e/c", 0), &caller).unwrap_err(),
            err::NO_CHILDREN_FOR_EPHEMERALS
        );
        assert_eq!(
            prep_create(&tree, &req("/x/y", 0), &caller).unwrap_err(),
            err::NO_NODE
        );
        assert_eq!(
            prep_create(&tree, &req("/x", 9), &caller).unwrap_err(),
            err::BAD_ARGUMENTS
        );
        match prep_create(&tree, &req("/s-", 2), &caller).unwrap() {
            TxnBody::Create { path, .. } => assert_eq!(path, "/s-0000000001"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            prep_delete(&tree, "/e", 3, &caller).unwrap_err(),
            err::BAD_VERSION
        );
        assert_eq!(
            prep_delete(&tree, "/", -1, &caller).unwrap_err(),
            err::BAD_ARGUMENTS
        );
        assert!(prep_set_data(&tree, "/e", b"x", 0, &caller).is_ok());
        let big = vec![0u8; MAX_DATA + 1];
        assert_eq!(
            prep_set_data(&tree, "/e", &big, -1, &caller).unwrap_err(),
            err::BAD_ARGUMENTS
        );
    }
}
