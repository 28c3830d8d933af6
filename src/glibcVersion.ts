/** The running glibc's version ('2.36'), from Node's diagnostic report; undefined on musl and off Linux. */
export function glibcVersion(): string | undefined {
  if (process.platform !== 'linux') return undefined
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined
  return report?.header?.glibcVersionRuntime
}
