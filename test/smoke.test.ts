import t from 'tap';
t.test('tap runs typescript', async (t) => {
  const x: number = 1 + 1;
  t.equal(x, 2);
});
