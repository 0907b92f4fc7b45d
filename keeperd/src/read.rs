//! Reads answered from the tree: getData, exists and getChildren bodies,
//! written straight from the nodes into the reply. The core uses them (and
//! registers watches); a connection task uses them through [`fast_reply`] to
//! answer a read without a trip through the core.

use crate::auth::{allowed, AuthId};
use crate::jute::Writer;
use crate::processor::validate_path;
use crate::proto::{err, perms, reply_frame_with, Request};
use crate::tree::{DataTree, Node};

fn readable<'t>(tree: &'t DataTree, auth: &[AuthId], path: &str) -> Result<&'t Node, i32> {
    validate_path(path, false)?;
    let node = tree.get(path).ok_or(err::NO_NODE)?;
    if !allowed(&node.acl, auth, perms::READ) {
        return Err(err::NO_AUTH);
    }
    Ok(node)
}

/// Writes getData's body (data, stat) for `path`.
pub fn get_data(tree: &DataTree, auth: &[AuthId], path: &str, w: &mut Writer) -> Result<(), i32> {
    let node = readable(tree, auth, path)?;
    w.buffer(&node.data);
    node.stat().write(w);
    Ok(())
}

/// Writes getChildren's body (names, and the stat for getChildren2).
pub fn get_children(
    tree: &DataTree,
    auth: &[AuthId],
    path: &str,
    with_stat: bool,
    w: &mut Writer,
) -> Result<(), i32> {
    let node = readable(tree, auth, path)?;
    let names = tree.children(path);
    w.i32(names.len() as i32);
    for name in names {
        w.string(name);
    }
    if with_stat {
        node.stat().write(w);
    }
    Ok(())
}

/// Writes exists' body (the stat) for `path`.
pub fn exists(tree: &DataTree, path: &str, w: &mut Writer) -> Result<(), i32> {
    validate_path(path, false)?;
    tree.get(path).ok_or(err::NO_NODE)?.stat().write(w);
    Ok(())
}

/// Whether `req` is a read a connection may answer by itself: a getData,
/// exists or getChildren that sets no watch (watches belong to the core).
pub fn answerable(req: &Request) -> bool {
    matches!(
        req,
        Request::GetData { watch: false, .. }
            | Request::Exists { watch: false, .. }
            | Request::GetChildren { watch: false, .. }
    )
}

/// The reply frame to `req` if a connection can answer it by itself: an
/// [`answerable`] read, on a tree whose every applied transaction is
/// visible, i.e. durable with its replies and events released (so the
/// answer exposes nothing that a crash could undo, and comes after every
/// event about what it shows). The caller must also have no request of its
/// own waiting in the core.
pub fn fast_reply(
    tree: &DataTree,
    visible_zxid: i64,
    auth: &[AuthId],
    xid: i32,
    req: &Request,
) -> Option<Vec<u8>> {
    if tree.last_zxid > visible_zxid || !answerable(req) {
        return None;
    }
    let zxid = tree.last_zxid;
    let (frame, _) = match req {
        Request::GetData { path, watch: false } => {
            reply_frame_with(xid, zxid, |w| get_data(tree, auth, path, w))
        }
        Request::Exists { path, watch: false } => {
            reply_frame_with(xid, zxid, |w| exists(tree, path, w))
        }
        Request::GetChildren {
            path,
            watch: false,
            with_stat,
        } => reply_frame_with(xid, zxid, |w| get_children(tree, auth, path, *with_stat, w)),
        _ => return None,
    };
    Some(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jute::Reader;
    use crate::proto::{Acl, Stat};
    use crate::txn::{Txn, TxnBody};

    fn tree() -> DataTree {
        let mut t = DataTree::new();
        for (zxid, path, acl) in [
            (1, "/a", Acl::open()),
            (
                2,
                "/secret",
                Acl {
                    perms: perms::ALL,
                    scheme: "digest".into(),
                    id: "bob:x".into(),
                },
            ),
        ] {
            let body = TxnBody::Create {
                path: path.into(),
                data: b"v".to_vec(),
                acl: vec![acl],
                ephemeral_owner: 0,
            };
            t.apply(
                &Txn {
                    zxid,
                    time: 0,
                    session: 1,
                    body,
                },
                &mut Vec::new(),
            );
        }
        t
    }

    /// (xid, zxid, err) of a reply frame.
    fn header(frame: &[u8]) -> (i32, i64, i32) {
        let mut r = Reader::new(&frame[4..]);
        (r.i32().unwrap(), r.i64().unwrap(), r.i32().unwrap())
    }

    #[test]
    fn answers_only_visible_unwatched_reads() {
        let t = tree();
        let get = |path: &str, watch| Request::GetData {
            path: path.into(),
            watch,
        };
        let f = fast_reply(&t, 2, &[], 5, &get("/a", false)).unwrap();
        assert_eq!(header(&f), (5, 2, err::OK));
        let mut w = Writer::new();
        get_data(&t, &[], "/a", &mut w).unwrap();
        assert_eq!(&f[20..], &w.buf[..]);
        for (path, code) in [
            ("/nope", err::NO_NODE),
            ("/secret", err::NO_AUTH),
            ("bad", err::BAD_ARGUMENTS),
        ] {
            let f = fast_reply(&t, 2, &[], 5, &get(path, false)).unwrap();
            assert_eq!(header(&f), (5, 2, code), "{path}");
            assert_eq!(f.len(), 20, "{path}: an error reply has no body");
        }
        // A watch, a write not yet visible, or a request that is not a plain read: the core answers.
        assert!(fast_reply(&t, 2, &[], 5, &get("/a", true)).is_none());
        assert!(fast_reply(&t, 1, &[], 5, &get("/a", false)).is_none());
        assert!(fast_reply(&t, 2, &[], 5, &Request::Ping).is_none());
        assert!(!answerable(&Request::Ping) && !answerable(&get("/a", true)));
        let kids = Request::GetChildren {
            path: "/".into(),
            watch: false,
            with_stat: true,
        };
        let f = fast_reply(&t, 2, &[], 6, &kids).unwrap();
        let mut r = Reader::new(&f[20..]);
        assert_eq!(
            r.vec(|r| r.string()).unwrap(),
            vec!["a", "secret", "zookeeper"]
        );
        assert_eq!(Stat::read(&mut r).unwrap().num_children, 3);
    }
}
