// The CSV download's progress: the body read chunk by chunk, each step told, the whole kept.
import { describe, expect, it } from 'vitest';
import { readWithProgress, sizeText } from '../src/diagnosis';

describe('CSV download progress', () => {
  it('tells the bytes received after each chunk and keeps them all', async () => {
    const chunks = ['Step,Rank\r\n', '0,0\r\n', '0,1\r\n'].map((c) => new TextEncoder().encode(c));
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(c);
        controller.close();
      },
    });
    const seen: number[] = [];
    const blob = await readWithProgress(body, 'text/csv', (n) => seen.push(n));
    expect(seen).toEqual([11, 16, 21]);
    expect(blob.type).toBe('text/csv');
    expect(await blob.text()).toBe('Step,Rank\r\n0,0\r\n0,1\r\n');
  });
  it('fails, saying so, when the body breaks off (issue 42 item 3)', async () => {
    let sent = false;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(new TypeError('network error'));
        sent = true;
        controller.enqueue(new TextEncoder().encode('Step,Rank\r\n0,'));
      },
    });
    const seen: number[] = [];
    await expect(readWithProgress(body, 'text/csv', (n) => seen.push(n))).rejects.toThrow(/download failed.*after 13 B.*nothing was saved/);
    expect(seen).toEqual([13]);
  });
  it('words sizes as people read them', () => {
    expect(sizeText(512)).toBe('512 B');
    expect(sizeText(48_000)).toBe('48 kB');
    expect(sizeText(117_300_000)).toBe('117.3 MB');
  });
});
