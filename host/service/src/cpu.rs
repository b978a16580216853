//! CPU-heavy request work (compiling a bot, debugging an NL model) off the async workers.

/// Runs jobs on blocking threads, at most `slots` at once, so the async workers keep
/// serving other requests. Default slots: half the cores. A tenant pushing huge bots in a
/// loop waits for a slot; it cannot take the workers that answer everyone's messages.
pub struct CpuJobs {
    slots: tokio::sync::Semaphore,
}

impl CpuJobs {
    pub fn new(slots: usize) -> CpuJobs {
        CpuJobs {
            slots: tokio::sync::Semaphore::new(slots.max(1)),
        }
    }

    /// Runs `job` once a slot is free; an error only if the job panicked.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        let _slot = self.slots.acquire().await?;
        Ok(tokio::task::spawn_blocking(job).await?)
    }
}
