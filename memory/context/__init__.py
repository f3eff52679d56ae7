"""The context: what one model call reads. The window plan and the injection gate (`assembler`), the
retrieved tier filled to its budget and rendered, the one renderer every door uses (`block`), the
whole call's plan (`recall`), token counts (`tokens`).

May import `memory.graph` and everything below it; never a door."""
