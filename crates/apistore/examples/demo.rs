//! Placeholder for the apistore demo: `cargo xtask demo` runs this against a fresh
//! etcd whose client URL it passes in `APISTORE_ENDPOINTS`. The real demo replaces it.

fn main() {
    match std::env::var("APISTORE_ENDPOINTS") {
        Ok(endpoints) => println!("apistore demo (placeholder): etcd at {endpoints}"),
        Err(_) => {
            eprintln!("APISTORE_ENDPOINTS is not set; run this through `cargo xtask demo`");
            std::process::exit(2);
        }
    }
}
