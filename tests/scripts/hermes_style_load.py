"""Hermes-style load on a state.db while session-switch sends.

Readers open the database as Hermes 0.19.0 does (`sqlite3.connect(path,
timeout=1.0)`, the system SQLite) and load a session's history in a loop;
one writer appends rows the way 0.19.0's `_execute_write` does
(`BEGIN IMMEDIATE` with `timeout=1.0`, retried on "database is locked" with a
random 20-150 ms pause, 15 attempts). Runs until the file named by --stop
exists, then prints one JSON line: counts of reads, writes and failures, and
the longest time a read or a write took, in seconds.

Usage: hermes_style_load.py DB SESSION --stop FILE [--readers N]
"""
import argparse, json, os, random, sqlite3, threading, time

def reader(db, session, stop, out):
    conn = sqlite3.connect(db, timeout=1.0, check_same_thread=False)
    while not os.path.exists(stop):
        started = time.monotonic()
        try:
            conn.execute("SELECT role, content FROM messages WHERE session_id = ? ORDER BY id",
                         (session,)).fetchall()
            out["reads"] += 1
        except sqlite3.OperationalError as e:
            out["read_failures"].append(str(e))
        out["worst_read"] = max(out["worst_read"], time.monotonic() - started)
        time.sleep(0.01)
    conn.close()

def writer(db, session, stop, out):
    conn = sqlite3.connect(db, timeout=1.0, isolation_level=None, check_same_thread=False)
    n = 0
    while not os.path.exists(stop):
        started = time.monotonic()
        for attempt in range(15):
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO messages (session_id, role, content, timestamp) "
                             "VALUES (?, 'assistant', ?, ?)", (session, f"hermes row {n}", time.time()))
                conn.execute("UPDATE sessions SET message_count = message_count + 1 WHERE id = ?",
                             (session,))
                conn.execute("COMMIT")
                out["writes"] += 1
                n += 1
                break
            except sqlite3.OperationalError as e:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.OperationalError:
                    pass
                if "locked" not in str(e) or attempt == 14:
                    out["write_failures"].append(str(e))
                    break
                time.sleep(random.uniform(0.02, 0.15))
        out["worst_write"] = max(out["worst_write"], time.monotonic() - started)
        time.sleep(0.05)
    conn.close()

def main():
    p = argparse.ArgumentParser()
    p.add_argument("db"); p.add_argument("session")
    p.add_argument("--stop", required=True)
    p.add_argument("--readers", type=int, default=3)
    a = p.parse_args()
    out = {"reads": 0, "writes": 0, "read_failures": [], "write_failures": [],
           "worst_read": 0.0, "worst_write": 0.0, "sqlite": sqlite3.sqlite_version}
    threads = [threading.Thread(target=reader, args=(a.db, a.session, a.stop, out))
               for _ in range(a.readers)]
    threads.append(threading.Thread(target=writer, args=(a.db, a.session, a.stop, out)))
    for t in threads: t.start()
    print("ready", flush=True)
    for t in threads: t.join()
    print(json.dumps(out), flush=True)

if __name__ == "__main__":
    main()
