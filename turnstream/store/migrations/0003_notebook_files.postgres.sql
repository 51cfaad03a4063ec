-- 0003: the data files of a notebook (uploaded CSV, TSV, Parquet, JSON, Excel), kept in the
-- database because it is the one place every server process reaches: a kernel in any process
-- gets them from here (a kernel's working directory is a tmpfs that dies with it). info is
-- what the server read from the file (format, variable, rows, columns); data the bytes.
CREATE TABLE notebook_files (
    session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name        text NOT NULL,
    size        bigint NOT NULL,
    sha256      text NOT NULL,
    info        json NOT NULL,
    data        bytea NOT NULL,
    created_at  double precision NOT NULL,
    PRIMARY KEY (session_id, name)
);
