// Counts the run for the closing line CI reads, "N passed, N failed" (", N skipped" when any were skipped). A suite
// that could not run at all counts as a failure. hack/test.sh prints the line after jest's own summary, so it is last.
import { writeFileSync } from 'node:fs';

export default class SummaryReporter {
  onRunComplete(_contexts, results) {
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    const skipped = results.numPendingTests + results.numTodoTests;
    const line = `${results.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`;
    if (process.env.TOKENVAULT_TEST_SUMMARY_FILE) writeFileSync(process.env.TOKENVAULT_TEST_SUMMARY_FILE, line);
    else process.stdout.write(`\n${line}`);
  }
}
