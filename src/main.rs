mod llm;
mod store;
mod tools;

fn main() {}
