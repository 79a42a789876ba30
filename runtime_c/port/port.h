/*
 * port.h -- what the bare-metal port (startup.c) offers a program besides start-up.
 */
#ifndef EDGEC_PORT_H
#define EDGEC_PORT_H

#include <stdint.h>

#ifdef EDGEC_REPORT_STACK
/*
 * Calls function(), stores its return value in *result and returns how many bytes of stack it
 * used below the caller's frame (its deepest point, found by painting the free stack first).
 */
uint32_t port_stack_used_by(int (*function)(void), int *result);
#endif

#endif /* EDGEC_PORT_H */
