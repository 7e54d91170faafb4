// Style sheets imported by pages are bundled by esbuild (src/pages/build.ts).
declare module '*.css';
