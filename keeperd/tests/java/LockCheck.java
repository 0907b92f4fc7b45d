// Drives keeperd with ZooKeeper's Java client and its WriteLock recipe.
// Usage: java LockCheck host:port [host:port [host:port]]: the three clients
// connect to the given servers in turn.
// Prints one line per checked step; exits non-zero on any failure.
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.recipes.lock.LockListener;
import org.apache.zookeeper.recipes.lock.WriteLock;

public class LockCheck {
    static ZooKeeper connect(String hosts) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(hosts, 5000, e -> {
            if (e.getState() == org.apache.zookeeper.Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(10, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection");
        }
        return zk;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAILED " + what);
            System.exit(1);
        }
        System.out.println("ok " + what);
    }

    public static void main(String[] args) throws Exception {
        ZooKeeper a = connect(args[0]);
        ZooKeeper b = connect(args[1 % args.length]);
        ZooKeeper c = connect(args[2 % args.length]);
        CountDownLatch bAcquired = new CountDownLatch(1);
        CountDownLatch cAcquired = new CountDownLatch(1);
        WriteLock la = new WriteLock(a, "/javalock", ZooDefs.Ids.OPEN_ACL_UNSAFE);
        WriteLock lb = new WriteLock(b, "/javalock", ZooDefs.Ids.OPEN_ACL_UNSAFE, new LockListener() {
            public void lockAcquired() { bAcquired.countDown(); }
            public void lockReleased() { }
        });
        WriteLock lc = new WriteLock(c, "/javalock", ZooDefs.Ids.OPEN_ACL_UNSAFE, new LockListener() {
            public void lockAcquired() { cAcquired.countDown(); }
            public void lockReleased() { }
        });
        check(la.lock(), "first client acquires the lock");
        check(!lb.lock(), "second client waits");
        check(!lc.lock(), "third client waits");
        check(la.isOwner() && !lb.isOwner() && !lc.isOwner(), "exactly one owner");
        // b and c queued through other servers: a's server may not have applied their
        // creates yet (reads are local, as in ZooKeeper), so catch up first.
        CountDownLatch synced = new CountDownLatch(1);
        a.sync("/javalock", (rc, path, ctx) -> synced.countDown(), null);
        check(synced.await(10, TimeUnit.SECONDS), "sync through the first client's server");
        check(a.getChildren("/javalock", false).size() == 3, "three contenders queued");
        la.unlock();
        check(bAcquired.await(10, TimeUnit.SECONDS), "second client acquires after release");
        check(lb.isOwner() && !lc.isOwner(), "second client is the only owner");
        b.close();
        check(cAcquired.await(10, TimeUnit.SECONDS), "third client acquires when the owner's session closes");
        check(lc.isOwner(), "third client owns the lock");
        String p = c.create("/javalock-seq-", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL);
        check(p.matches("/javalock-seq-\\d{10}"), "sequential suffix " + p);
        lc.unlock();
        a.close();
        c.close();
        System.out.println("DONE");
    }
}
