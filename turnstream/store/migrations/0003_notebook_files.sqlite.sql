-- 0003: the data files of a notebook (uploaded CSV, TSV, Parquet, JSON, Excel), kept in the
-- database because it is the one place every server process reaches: a kernel in any process
-- gets them from here (a kernel's working directory is a tmpfs that dies with it). info is
-- what the server read from the file (format, variable, rows, columns) as JSON; data the bytes.
CREATE TABLE notebook_files (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    sha256      TEXT NOT NULL,
    info        TEXT NOT NULL,
    data        BLOB NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (session_id, name)
);
