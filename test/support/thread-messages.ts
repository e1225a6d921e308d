import { Worker } from 'node:worker_threads';

/** What the main thread posts to worker threads (the SQLite query thread) while `step` runs. */
export async function postedDuring<T>(step: () => Promise<T>): Promise<{ sent: unknown[]; result: T }> {
  const sent: unknown[] = [];
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (
    this: Worker,
    message: unknown,
    transfer?: Parameters<Worker['postMessage']>[1],
  ) {
    sent.push(message);
    return post.call(this, message, transfer);
  };
  try {
    return { sent, result: await step() };
  } finally {
    Worker.prototype.postMessage = post;
  }
}
