//! A database that exists only on [`crate::control::fake::FakeMachines`]: its setup and
//! teardown are one command each that the fake machines understand, and its server process is
//! the machines' own; nothing listens for clients. For the tests of the harness's own rules.

use async_trait::async_trait;

use super::{Db, ServerProcess};
use crate::control::fake::CONFIG_DIR;
use crate::control::{Control, Node, Retry};

/// The fake database on every node.
pub struct FakeDb;

impl FakeDb {
    async fn on_every_node(control: &Control, command: &str) -> anyhow::Result<()> {
        for node in control.nodes() {
            control.exec(node, command, Retry::Once).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Db for FakeDb {
    fn name(&self) -> &str {
        "fake"
    }
    fn client_address(&self, _node: &Node) -> String {
        // Port 1 on loopback: nothing listens, so a client is refused at once.
        "127.0.0.1:1".into()
    }
    async fn setup(&self, control: &Control) -> anyhow::Result<()> {
        FakeDb::on_every_node(control, "fake-db setup").await
    }
    async fn teardown(&self, control: &Control) -> anyhow::Result<()> {
        FakeDb::on_every_node(control, "fake-db teardown").await
    }
    fn process(&self, node: &Node) -> ServerProcess {
        let home = format!("{CONFIG_DIR}{}", node.name);
        ServerProcess {
            config: format!("{home}/server.cfg"),
            home,
            command: "fake-server".into(),
            log: "server.log".into(),
            output: "server.out".into(),
        }
    }
    fn txn_dir(&self, node: &Node) -> String {
        self.data_dir(node)
    }
    async fn wipe(&self, _control: &Control, _node: &Node) -> anyhow::Result<()> {
        Ok(())
    }
    fn clock_file(&self, _node: &Node) -> Option<String> {
        None
    }
    fn data_dir(&self, node: &Node) -> String {
        format!("{CONFIG_DIR}{}/data", node.name)
    }
}
