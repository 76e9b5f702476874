//! (stage being written)
