//! Regular expressions → grammar expressions (being written).
